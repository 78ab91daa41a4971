package source

import (
	"context"
	"time"
)

// resolveTimeout bounds one shared ls-remote; each caller's context still
// bounds its own wait.
const resolveTimeout = 2 * time.Minute

// Resolve is Resolve(ctx, req) shared among the concurrent callers that
// ask for the same ref of the same repository with the same credentials:
// a caller gets the answer of an ls-remote that started after it called,
// never an older one, and every caller that asks while one runs shares
// the next. A thousand Syncs of one branch woken by one push cost a few
// ls-remotes, not a thousand, and none of them misses the push.
func (m *Mirror) Resolve(ctx context.Context, req Request) (string, error) {
	if req.Ref.Commit != "" {
		return req.Ref.Commit, nil
	}
	key := mirrorKey(req) + "\x00" + req.Ref.String()
	m.resolveMu.Lock()
	if m.resolving == nil {
		m.resolving = map[string]*refResolution{}
	}
	r, ok := m.resolving[key]
	if !ok {
		r = &refResolution{}
		m.resolving[key] = r
	}
	var call *resolveCall
	switch {
	case r.next != nil:
		call = r.next
	case r.running != nil:
		r.next = &resolveCall{done: make(chan struct{})}
		call = r.next
	default:
		r.running = &resolveCall{done: make(chan struct{})}
		call = r.running
		go m.runResolve(key, r, req)
	}
	m.resolveMu.Unlock()
	select {
	case <-call.done:
		return call.revision, call.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// refResolution is the ls-remote of one ref running now, and the one its
// latecomers wait for.
type refResolution struct {
	running, next *resolveCall
}

type resolveCall struct {
	done     chan struct{}
	revision string
	err      error
}

// runResolve runs r.running, then r.next if callers queued for one,
// until none is left; req is the same for every caller of key.
func (m *Mirror) runResolve(key string, r *refResolution, req Request) {
	for {
		call := r.running
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		m.resolves.Add(1)
		call.revision, call.err = Resolve(ctx, req)
		cancel()
		close(call.done)
		m.resolveMu.Lock()
		r.running, r.next = r.next, nil
		if r.running == nil {
			delete(m.resolving, key)
			m.resolveMu.Unlock()
			return
		}
		m.resolveMu.Unlock()
	}
}
