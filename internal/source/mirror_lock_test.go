package source

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/driftless/driftless/internal/testenv"
)

// stallingProxy forwards TCP connections to a real git server, or, once
// stalled, holds every request without an answer — new connections and
// kept-alive ones alike: a server that hangs mid-fetch, which a real
// server does not do on demand.
type stallingProxy struct {
	ln     net.Listener
	target string
	closed chan struct{}

	mu      sync.Mutex
	stalled bool
	held    int
	conns   []net.Conn
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{ln: ln, target: target, closed: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		close(p.closed)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *stallingProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go p.forward(c)
	}
}

// forward passes c's bytes to the server and back, until a request
// arrives while the proxy is stalled: that one is held.
func (p *stallingProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(c, up); c.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled := p.stalled
			if stalled {
				p.held++
			}
			p.mu.Unlock()
			if stalled {
				<-p.closed
				return
			}
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			up.Close()
			return
		}
	}
}

// stall holds every later request; heldRequests counts them.
func (p *stallingProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

func (p *stallingProxy) heldRequests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// behind returns the URL of repo's HTTP address through p.
func (p *stallingProxy) behind(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, what, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
}

// returns runs f and reports whether it returned before the stalled fetch
// ended; a reader that waits for another's fetch never does, so the test
// stops waiting after a minute and fails instead of hanging.
func returns(f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true
	case <-time.After(time.Minute):
		return false
	}
}

func TestReadersOfAFetchedRevisionDoNotWaitForAnotherReadersFetch(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "first", map[string]string{"apps/a/app.yaml": "v: 1\n"})
	upstream, err := url.Parse(repo.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newStallingProxy(t, upstream.Host)
	req := Request{URL: proxy.behind(t, repo.HTTPURL()), Ref: Ref{Branch: "main"}}
	m := &Mirror{Dir: t.TempDir()}

	held, err := m.Checkout(context.Background(), req, first)
	if err != nil {
		t.Fatalf("first checkout: %v", err)
	}
	held.Release()

	// Another Sync's fetch of a new commit hangs in the network.
	second := repo.Commit(t, "second", map[string]string{"apps/a/app.yaml": "v: 2\n"})
	proxy.stall()
	hung, cancelHung := context.WithCancel(context.Background())
	hungDone := make(chan error, 1)
	go func() {
		tr, err := m.Checkout(hung, req, second)
		tr.Release()
		hungDone <- err
	}()
	t.Cleanup(func() {
		cancelHung()
		<-hungDone
	})
	waitFor(t, "the fetch of the second commit to reach the stalled server", func() bool { return proxy.heldRequests() > 0 })

	ctx := context.Background()
	if !returns(func() {
		tr, err := m.Checkout(ctx, req, first)
		if err != nil {
			t.Errorf("checkout of the fetched revision: %v", err)
		}
		tr.Release()
	}) {
		t.Fatal("a checkout of a revision the mirror holds waited for another reader's fetch")
	}
	if !returns(func() {
		if _, ok, err := m.PathsDigest(ctx, req, first, []string{"apps/a"}); err != nil || !ok {
			t.Errorf("PathsDigest of the fetched revision: %v, %v", ok, err)
		}
	}) {
		t.Fatal("PathsDigest of a revision the mirror holds waited for another reader's fetch")
	}

	// Readers that wait for the hung fetch leave when their context ends.
	for name, wait := range map[string]func(context.Context) error{
		"Checkout": func(ctx context.Context) error {
			tr, err := m.Checkout(ctx, req, second)
			tr.Release()
			return err
		},
		"PathsDigest": func(ctx context.Context) error {
			_, _, err := m.PathsDigest(ctx, req, second, nil)
			return err
		},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var err error
		waited := returns(func() {
			time.AfterFunc(50*time.Millisecond, cancel)
			err = wait(ctx)
		})
		cancel()
		if !waited {
			t.Fatalf("%s of the commit being fetched did not return when its context was cancelled", name)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
}
