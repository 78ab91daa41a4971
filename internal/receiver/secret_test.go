package receiver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// flakyReader is an API server that can stall (Get waits for its context)
// or fail.
type flakyReader struct {
	client.Reader
	mu      sync.Mutex
	stall   bool
	fail    error
	called  chan struct{} // gets a value when a stalled Get starts
	unstall chan struct{} // closed, ends stalled Gets
}

func (r *flakyReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.mu.Lock()
	stall, fail := r.stall, r.fail
	r.mu.Unlock()
	if stall {
		select {
		case r.called <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.unstall:
			return errors.New("stalled")
		}
	}
	if fail != nil {
		return fail
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *flakyReader) set(stall bool, fail error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stall, r.fail = stall, fail
}

// doWithin serves req on another goroutine and fails the test if it is
// not answered within d.
func (f *fixture) doWithin(d time.Duration, req request) int {
	f.t.Helper()
	done := make(chan int, 1)
	go func() {
		hr := httptest.NewRequest(http.MethodPost, req.path, bytes.NewReader(req.body))
		for k, v := range req.headers {
			hr.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		f.r.ServeHTTP(w, hr)
		done <- w.Code
	}()
	select {
	case code := <-done:
		return code
	case <-time.After(d):
		f.t.Fatalf("no answer within %s", d)
		return 0
	}
}

func TestAStalledAPIServerCostsARequestAtMostTheReadTimeout(t *testing.T) {
	var api *flakyReader
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) {
		api = &flakyReader{Reader: o.Secrets, stall: true, called: make(chan struct{}, 1)}
		o.Secrets = api
	})
	f.r.secrets.timeout = 50 * time.Millisecond
	req := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "")
	if code := f.doWithin(10*time.Second, req); code != http.StatusServiceUnavailable {
		t.Errorf("with the API server stalled and no secret read yet: status %d, want 503", code)
	}
	api.set(false, nil)
	if code := f.doWithin(10*time.Second, req); code != http.StatusOK {
		t.Errorf("once the API server answers: status %d, want 200", code)
	}
}

func TestARequestDoesNotQueueBehindAStalledSecretRead(t *testing.T) {
	var api *flakyReader
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) {
		api = &flakyReader{Reader: o.Secrets, stall: true, called: make(chan struct{}, 1)}
		o.Secrets = api
	})
	f.r.secrets.timeout = time.Minute
	api.unstall = make(chan struct{})
	first := make(chan struct{})
	go func() {
		defer close(first)
		_, _ = f.r.secrets.forProvider(context.Background(), GitHub, f.now)
	}()
	<-api.called // the first read is stalled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := make(chan error, 1)
	go func() {
		_, err := f.r.secrets.forProvider(ctx, GitHub, f.now)
		got <- err
	}()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a request that gave up while the read was stalled: %v, want it to end with its context", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request waited behind a stalled read of the Secret past its own context")
	}
	close(api.unstall)
	<-first
}

func TestTheLastSecretReadServesForABoundedTimeWhileReadsFail(t *testing.T) {
	var api *flakyReader
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) {
		api = &flakyReader{Reader: o.Secrets}
		o.Secrets = api
	})
	req := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "")
	if code, _ := f.do(req); code != http.StatusOK {
		t.Fatalf("status %d, want 200", code)
	}
	api.set(false, errors.New("the server is currently unable to handle the request"))
	f.now = f.now.Add(time.Minute)
	if code, reply := f.do(req); code != http.StatusOK {
		t.Errorf("a minute into an API outage: status %d (%s), want 200 with the last secret read", code, reply.Message)
	}
	f.now = f.now.Add(secretStaleFor)
	if code, _ := f.do(req); code != http.StatusServiceUnavailable {
		t.Errorf("past %s of API outage: status %d, want 503", secretStaleFor, code)
	}
	api.set(false, nil)
	if code, _ := f.do(req); code != http.StatusOK {
		t.Errorf("once the API server answers again: status %d, want 200", code)
	}
}
