package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/google/pprof/profile"
)

// controlProfile takes CPU profiles of the control plane over one span of
// the bench, with -apiserver-profile DIR: kube-apiserver's as
// DIR/<name>.pprof and etcd's as DIR/<name>-etcd.pprof. Go's pprof
// endpoint profiles for a number of seconds given up front, and a span's
// length is not known in advance, so each process is profiled one second
// at a time, back to back, and the seconds are merged: the profile covers
// the span and up to one second after it. The returned func ends the span
// and writes the files (called again, it returns the first call's error);
// without -apiserver-profile it does nothing.
func (b *bench) controlProfile(ctx context.Context, name string) (stop func() error) {
	if b.o.apiserverProfileDir == "" {
		return func() error { return nil }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	targets := []struct {
		file  string
		fetch func(context.Context) ([]byte, error)
	}{
		{name + ".pprof", func(ctx context.Context) ([]byte, error) {
			return b.env.Clientset.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "1").DoRaw(ctx)
		}},
		{name + "-etcd.pprof", func(ctx context.Context) ([]byte, error) {
			return httpGet(ctx, b.env.ControlPlane.EtcdURL+"/debug/pprof/profile?seconds=1")
		}},
	}
	for i, t := range targets {
		wg.Go(func() {
			errs[i] = profileUntil(ctx, done, t.fetch, filepath.Join(b.o.apiserverProfileDir, t.file))
		})
	}
	return sync.OnceValue(func() error {
		close(done)
		wg.Wait()
		return errors.Join(errs...)
	})
}

// profileUntil fetches one-second CPU profiles until done is closed (the
// one in flight then is finished) and writes them, merged, to path.
func profileUntil(ctx context.Context, done <-chan struct{}, fetch func(context.Context) ([]byte, error), path string) error {
	var parts []*profile.Profile
	for stopped := false; !stopped; {
		data, err := fetch(ctx)
		if err != nil {
			return fmt.Errorf("profile for %s: %w", filepath.Base(path), err)
		}
		p, err := profile.Parse(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("profile for %s: %w", filepath.Base(path), err)
		}
		parts = append(parts, p)
		select {
		case <-done:
			stopped = true
		default:
		}
	}
	merged, err := profile.Merge(parts)
	if err != nil {
		return fmt.Errorf("merge the profiles for %s: %w", filepath.Base(path), err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(merged.Write(f), f.Close())
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(data))
	}
	return data, err
}
