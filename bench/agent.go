package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/driftless/driftless/api/v1alpha1"
	driftless "github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/controller"
)

// syncNamespace holds the benchmark's Syncs.
const syncNamespace = "driftless-system"

// webhookSecretName is the agent's webhook Secret (--webhook-secret), in
// syncNamespace.
const webhookSecretName = "driftless-webhooks"

var scheme = v1alpha1.NewScheme()

// clientLimits is the agent's client-side rate limit.
type clientLimits struct {
	name       string
	qps        float32
	burst      int
	unthrottle bool
}

var (
	// shipped is what `driftless agent` sets by default (--kube-api-qps 0):
	// no client-side limit when the API server applies priority and
	// fairness, as the bench's does, else 500/s. The figure users get.
	shipped = clientLimits{name: "as shipped (--kube-api-qps 0: no client-side limit under the API server's priority and fairness)"}
	// unthrottled turns client-side limiting off, leaving flow control to
	// the API server (controller-runtime's own default): what the engine
	// does when only the server limits it.
	unthrottled = clientLimits{name: "no client-side rate limit", unthrottle: true}
)

// parseLimits reads -client-limits: "agent", "none" or "QPS/BURST".
func parseLimits(s string) (clientLimits, error) {
	switch s {
	case "agent":
		return shipped, nil
	case "none":
		return unthrottled, nil
	}
	var qps float32
	var burst int
	if _, err := fmt.Sscanf(s, "%g/%d", &qps, &burst); err != nil || qps <= 0 || burst <= 0 {
		return clientLimits{}, fmt.Errorf("-client-limits is agent, none or QPS/BURST (like 50/100), not %q", s)
	}
	return clientLimits{name: fmt.Sprintf("client QPS %g, burst %d", qps, burst), qps: qps, burst: burst}, nil
}

// agent is the driftless agent running in this process, assembled by
// internal/agent as `driftless agent` is, with every API request it makes
// counted.
type agent struct {
	requests *requestCounter
	// installed is what the agent's install (CRDs, namespace) asked of
	// the API server, before it served anything.
	installed requestCounts
	cancel    context.CancelFunc
	done      chan error
	cacheDir  string
	// hooks is the webhook receiver's base URL (http://127.0.0.1:port),
	// when the agent serves webhooks.
	hooks string
	// syncs is the agent's Sync controller, for its git mirror's counts.
	syncs *controller.SyncReconciler
	// stopped is set, with stopErr, once stop has run.
	stopped bool
	stopErr error
}

// startAgent starts an agent in syncNamespace and waits until its caches
// are synced. With webhooks, it also serves the webhook receiver on a
// loopback port, as --webhook-bind-address and
// --webhook-secret=driftless-webhooks would.
func startAgent(ctx context.Context, base *rest.Config, limits clientLimits, concurrent int, webhooks bool, logs io.Writer) (*agent, error) {
	a := &agent{requests: newRequestCounter(), done: make(chan error, 1)}
	cfg := rest.CopyConfig(base)
	cfg.Wrap(a.requests.wrap)
	dir, err := os.MkdirTemp("", "driftless-bench-agent-")
	if err != nil {
		return nil, err
	}
	a.cacheDir = dir
	opts := driftless.DefaultOptions()
	opts.Config, opts.Namespace, opts.CacheDir, opts.LogTo = cfg, syncNamespace, dir, logs
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.QPS, opts.Burst = limits.qps, limits.burst
	if limits.unthrottle {
		opts.QPS, opts.Burst = -1, 0
	}
	if concurrent > 0 {
		opts.Concurrency = concurrent
	}
	if webhooks {
		// The receiver listens itself; a port the kernel just handed out
		// and took back is free for it.
		addr, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		opts.WebhookAddr, opts.WebhookSecret = addr, webhookSecretName
		a.hooks = "http://" + addr
	}
	ag, err := driftless.New(opts)
	if err != nil {
		return nil, err
	}
	if err := ag.Install(ctx); err != nil {
		return nil, err
	}
	a.installed, _ = a.requests.snapshot()
	if err := ag.Setup(); err != nil {
		return nil, err
	}
	a.syncs = ag.Syncs()
	runCtx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.done <- ag.Serve(runCtx) }()
	waitCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if !ag.WaitForCacheSync(waitCtx) {
		return nil, errors.Join(errors.New("the agent's cache did not sync"), a.stop())
	}
	return a, nil
}

// waitForWorkers returns once the agent's Sync controller runs its
// workers. WaitForCacheSync returns when the caches the manager knows of
// are synced; the Sync controller starts its workers a little later, once
// its own event sources have synced — about a second later in a third of
// round 6's repetitions. A Sync created in that gap waits for the workers,
// which a running agent does not make it do, and the floor does not pay.
// So before a timed first sync the bench creates a suspended Sync, waits
// until the agent has put its finalizer on it (the first thing a worker
// does with a Sync), deletes it and waits until it is gone. A suspended
// Sync reads no git and writes nothing else; what the probe costs is not
// in the timed run's counts, which start after this returns.
func (a *agent) waitForWorkers(ctx context.Context, admin client.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	probe := newSync(fmt.Sprintf("workers-probe-%d", time.Now().UnixNano()), url, time.Hour, 0)
	probe.Spec.Suspend = true
	if err := admin.Create(ctx, probe); err != nil {
		return fmt.Errorf("create the probe Sync: %w", err)
	}
	key := client.ObjectKeyFromObject(probe)
	poll := func(done func(err error, s *v1alpha1.Sync) bool) error {
		for {
			var s v1alpha1.Sync
			if done(admin.Get(ctx, key, &s), &s) {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if err := poll(func(err error, s *v1alpha1.Sync) bool {
		return err == nil && controllerutil.ContainsFinalizer(s, v1alpha1.Finalizer)
	}); err != nil {
		return fmt.Errorf("the agent's Sync controller did not take the probe Sync within a minute: %w", err)
	}
	if err := admin.Delete(ctx, probe); err != nil {
		return fmt.Errorf("delete the probe Sync: %w", err)
	}
	if err := poll(func(err error, _ *v1alpha1.Sync) bool { return apierrors.IsNotFound(err) }); err != nil {
		return fmt.Errorf("the probe Sync was not finalized within a minute: %w", err)
	}
	return nil
}

// freeLoopbackAddr returns a loopback address whose port was free a
// moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// stop stops the agent and removes its checkouts; stopping it again
// returns the first stop's error.
func (a *agent) stop() error {
	if a.stopped {
		return a.stopErr
	}
	a.cancel()
	err := <-a.done
	a.stopped, a.stopErr = true, errors.Join(err, os.RemoveAll(a.cacheDir))
	return a.stopErr
}

// newSync returns the benchmark's Sync of url.
func newSync(name, url string, interval, timeout time.Duration) *v1alpha1.Sync {
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: syncNamespace},
		Spec: v1alpha1.SyncSpec{
			Source:   v1alpha1.Source{Git: v1alpha1.GitSource{URL: url, Branch: "main"}},
			Interval: metav1.Duration{Duration: interval},
		},
	}
	if timeout > 0 {
		s.Spec.Timeout = &metav1.Duration{Duration: timeout}
	}
	return s
}

// syncedAt reports whether s is Ready after applying revision.
func syncedAt(s *v1alpha1.Sync, revision string) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	return s.Status.LastAppliedRevision == revision && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.Generation
}

// failed returns the Ready message when s failed at revision.
func failed(s *v1alpha1.Sync, revision string) (string, bool) {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	if s.Status.LastAttemptedRevision == revision && c != nil && c.Status == metav1.ConditionFalse {
		return c.Reason + ": " + c.Message, true
	}
	return "", false
}

// syncFailure is a Sync that failed at the revision awaited.
type syncFailure struct {
	revision, message string
}

func (e *syncFailure) Error() string {
	return fmt.Sprintf("the Sync failed at %.7s: %s", e.revision, e.message)
}

// short is the failure's first line, cut to a table cell.
func (e *syncFailure) short() string {
	msg, _, _ := strings.Cut(e.message, "\n")
	if len(msg) > 200 {
		msg = msg[:200] + " …"
	}
	return msg
}

// syncWatch watches one Sync with the admin client, re-opening the watch
// when the server ends it.
type syncWatch struct {
	c    client.WithWatch
	name string
	w    watch.Interface
}

func watchSync(ctx context.Context, c client.WithWatch, name string) (*syncWatch, error) {
	sw := &syncWatch{c: c, name: name}
	return sw, sw.open(ctx)
}

func (sw *syncWatch) open(ctx context.Context) error {
	w, err := sw.c.Watch(ctx, &v1alpha1.SyncList{}, client.InNamespace(syncNamespace),
		client.MatchingFields{"metadata.name": sw.name})
	sw.w = w
	return err
}

// until returns the first version of the Sync for which done is true, and
// when it arrived. A Sync that failed at revision is an error.
func (sw *syncWatch) until(ctx context.Context, revision string, done func(*v1alpha1.Sync) bool) (*v1alpha1.Sync, time.Time, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, time.Time{}, fmt.Errorf("waiting for the Sync at %.7s: %w", revision, ctx.Err())
		case ev, ok := <-sw.w.ResultChan():
			if !ok {
				// The server ended the watch: open a new one and look at
				// what may have been missed.
				if err := sw.open(ctx); err != nil {
					return nil, time.Time{}, err
				}
				var s v1alpha1.Sync
				if err := sw.c.Get(ctx, client.ObjectKey{Namespace: syncNamespace, Name: sw.name}, &s); err != nil {
					return nil, time.Time{}, err
				}
				if done(&s) {
					return &s, time.Now(), nil
				}
				continue
			}
			at := time.Now()
			s, ok := ev.Object.(*v1alpha1.Sync)
			if !ok {
				continue
			}
			if done(s) {
				return s, at, nil
			}
			if msg, bad := failed(s, revision); bad {
				return nil, at, &syncFailure{revision: revision, message: msg}
			}
		}
	}
}

func (sw *syncWatch) stop() { sw.w.Stop() }
