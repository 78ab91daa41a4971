package source

import (
	"context"
	"time"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
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
	return m.ResolveSince(ctx, req, time.Now())
}

// ResolveSince is Resolve, except that the answer of any ls-remote that
// started after since will do: the last one, when it started after since;
// else the one running, when it did; else the next. Callers that poll
// with since = now − interval cost at most one ls-remote per repository,
// ref and credentials per interval in total, however many they are: a
// hundred Syncs waiting for a rollout and watching for a new commit every
// 3 s cost one ls-remote every 3 s, not 33 a second. The answer may be an
// error, which is shared the same way.
func (m *Mirror) ResolveSince(ctx context.Context, req Request, since time.Time) (string, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		m.resolves.Add(1)
		return oci.Resolve(ctx, *req.OCI)
	}
	if req.Ref.Commit != "" {
		return req.Ref.Commit, nil
	}
	key := mirrorKey(req) + "\x00" + req.Ref.String()
	m.resolveMu.Lock()
	if last, ok := m.resolved[key]; ok && last.started.After(since) {
		m.resolveMu.Unlock()
		return last.revision, last.err
	}
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
	case r.running != nil && r.running.started.After(since):
		call = r.running
	case r.next != nil:
		call = r.next
	case r.running != nil:
		r.next = &resolveCall{done: make(chan struct{})}
		call = r.next
	default:
		r.running = &resolveCall{done: make(chan struct{}), started: time.Now()}
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

// resolveCall is one ls-remote; started is set when it starts, under
// Mirror.resolveMu, and the other fields before done is closed.
type resolveCall struct {
	done     chan struct{}
	started  time.Time
	revision string
	err      error
}

// runResolve runs r.running, then r.next if callers queued for one,
// until none is left; req is the same for every caller of key. Each
// answer is kept in m.resolved for ResolveSince.
func (m *Mirror) runResolve(key string, r *refResolution, req Request) {
	for {
		call := r.running
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		m.resolves.Add(1)
		revision, err := Resolve(ctx, req)
		cancel()
		m.resolveMu.Lock()
		call.revision, call.err = revision, err
		close(call.done)
		if m.resolved == nil {
			m.resolved = map[string]resolvedRef{}
		}
		if last, ok := m.resolved[key]; !ok || call.started.After(last.started) {
			m.resolved[key] = resolvedRef{started: call.started, revision: revision, err: err}
		}
		r.running, r.next = r.next, nil
		if r.running == nil {
			delete(m.resolving, key)
			m.resolveMu.Unlock()
			return
		}
		r.running.started = time.Now()
		m.resolveMu.Unlock()
	}
}

// resolvedRef is the answer of the last ls-remote of a ref, and when
// that ls-remote started.
type resolvedRef struct {
	started  time.Time
	revision string
	err      error
}
