package receiver

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/controller"
)

// listSignal tells when a request has got as far as listing Syncs.
type listSignal struct {
	client.Reader
	listed chan struct{}
}

func (l *listSignal) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	select {
	case l.listed <- struct{}{}:
	default:
	}
	return l.Reader.List(ctx, list, opts...)
}

func TestARequestUnderWayWhenTheAgentStopsIsAllowedToFinish(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	wake := make(chan controller.WakeUp) // taken by hand below
	listed := make(chan struct{}, 1)
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) {
		o.Addr, o.Wake = addr, wake
		o.Syncs = &listSignal{Reader: o.Syncs, listed: listed}
		o.Limits.WakeTimeout = time.Minute
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.r.Start(ctx) }()

	req := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "d1")
	status := make(chan int, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			hr, _ := http.NewRequest(http.MethodPost, "http://"+addr+req.path, bytes.NewReader(req.body))
			for k, v := range req.headers {
				hr.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(hr)
			if err == nil {
				resp.Body.Close()
				status <- resp.StatusCode
				return
			}
			if time.Now().After(deadline) {
				status <- 0
				return
			}
			time.Sleep(20 * time.Millisecond) // poll until the receiver listens
		}
	}()
	select {
	case <-listed: // the request is under way, about to hand Syncs over
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the receiver")
	}
	cancel()
	// Shutdown closes the listener first; wait for that, then take the
	// Syncs the request hands over.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the receiver still accepts connections after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range fleetMain {
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("the request under way gave up its wake-up when the agent began to stop")
		}
	}
	if code := <-status; code != http.StatusOK {
		t.Errorf("the request under way when the agent stopped: status %d, want 200", code)
	}
	if err := <-done; err != nil {
		t.Errorf("Start = %v, want nil", err)
	}
}
