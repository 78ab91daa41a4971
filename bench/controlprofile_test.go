package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/driftless/driftless/internal/testenv"
)

// TestControlPlaneProfilesCoverASpan profiles a real control plane over
// a floor apply, as -apiserver-profile does, and reads back one CPU
// profile of kube-apiserver and one of etcd, each covering at least the
// span.
func TestControlPlaneProfilesCoverASpan(t *testing.T) {
	if testing.Short() && !testenv.CI() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := testenv.StartWith(ctx, testenv.Options{Profiling: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	b := &bench{o: options{apiserverProfileDir: dir}, env: env}

	stop := b.controlProfile(ctx, "floor")
	took, err := floorApply(ctx, env.Config, newWorkload("p", 100), 8, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Errorf("a second stop: %v, want the first one's nil", err)
	}

	for file, binary := range map[string]string{"floor.pprof": "kube-apiserver", "floor-etcd.pprof": "etcd"} {
		f, err := os.Open(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(p.Mapping) == 0 || !strings.HasSuffix(p.Mapping[0].File, binary) {
			t.Errorf("%s: the profile of %v, want %s's", file, p.Mapping, binary)
		}
		if len(p.SampleType) == 0 || p.SampleType[len(p.SampleType)-1].Type != "cpu" {
			t.Errorf("%s: sample types %v, want a CPU profile", file, p.SampleType)
		}
		// One-second profiles back to back until the span ended: the
		// gaps between them leave out a little of it, not more.
		if got := time.Duration(p.DurationNanos); got < max(time.Second, took*3/4) {
			t.Errorf("%s: covers %s, want most of the floor's %s", file, got, took)
		}
	}
}
