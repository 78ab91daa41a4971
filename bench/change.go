package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// change is a one-object change committed to git, until it is applied.
type change struct {
	// NextInterval: commit, at a random point of the interval → the
	// ConfigMap changed in the cluster, with the Sync picking the commit
	// up at its next interval: on average half an interval plus the sync.
	NextInterval timing `json:"next_interval_s"`
	// Triggered: commit, then a spec edit that syncs at once, as a webhook
	// would → the ConfigMap changed.
	Triggered timing `json:"triggered_s"`
	// Engine is the triggered syncs' own duration, from their status.
	Engine timing `json:"triggered_engine_s"`
	// Requests are driftless's own requests for the last triggered change,
	// from the commit until the Sync's status recorded it.
	Requests requestSummary `json:"driftless_requests"`
	// Webhook: commit, then a signed GitHub push notice to the agent's
	// webhook receiver, each run right after a spec-edit triggered change.
	Webhook  webhookChange `json:"webhook"`
	Interval float64       `json:"interval_s"`
	// WallProfile covers the triggered and webhook changes, with -profile.
	WallProfile *wallProfile `json:"wall_profile,omitempty"`
}

// trigger is what makes the Sync pick a commit up.
type trigger int

const (
	// atInterval waits for the Sync's next interval.
	atInterval trigger = iota
	// specEdit edits the Sync's spec, which syncs at once.
	specEdit
	// pushNotice sends a signed push notice to the webhook receiver.
	pushNotice
)

// changeRun is one change's timings, from the commit (or the push notice)
// on.
type changeRun struct {
	// applied is until the ConfigMap changed in the cluster; ready until
	// the Sync was Ready at the commit.
	applied, ready time.Duration
	// engine is the sync's own duration, from its status.
	engine time.Duration
	// reply is the webhook receiver's reply time.
	reply    time.Duration
	requests requestCounts
}

// change commits one-object changes: first some picked up at the next
// interval, then repeats triggered at once, each by a spec edit and then
// by a push notice to the webhook receiver, alternating so that a noisy
// neighbour hits both alike.
func (b *bench) change(ctx context.Context, l *live, r *change) error {
	r.Interval = b.o.interval.Seconds()
	n := 0
	for rep := 0; rep < b.o.intervalChanges; rep++ {
		n++
		c, err := b.oneChange(ctx, l, n, atInterval)
		if err != nil {
			return err
		}
		r.NextInterval.add(c.applied)
		step("change, next interval: %.2f s (engine %.2f s, %d requests)", c.applied.Seconds(), c.engine.Seconds(), c.requests.total())
	}
	var sampler *wallSampler
	stopCPU := func() {}
	if b.o.profileDir != "" {
		sampler = startWallSampler(10 * time.Millisecond)
		var err error
		if stopCPU, err = b.prof.cpu(fmt.Sprintf("cpu-change-%d", b.size)); err != nil {
			return err
		}
	}
	for rep := 0; rep < b.o.changeRepeats; rep++ {
		n++
		c, err := b.oneChange(ctx, l, n, specEdit)
		if err != nil {
			return err
		}
		r.Triggered.add(c.applied)
		r.Engine.add(c.engine)
		r.Requests = summarize(c.requests)
		step("change, triggered: %.2f s (engine %.2f s, %d requests)", c.applied.Seconds(), c.engine.Seconds(), c.requests.total())

		n++
		if c, err = b.oneChange(ctx, l, n, pushNotice); err != nil {
			return err
		}
		r.Webhook.add(c)
		step("change, webhook: %.2f s to applied, %.2f s to Ready (reply %.0f ms, engine %.2f s, %d requests)",
			c.applied.Seconds(), c.ready.Seconds(), float64(c.reply.Microseconds())/1000, c.engine.Seconds(), c.requests.total())
	}
	stopCPU()
	if sampler != nil {
		p := sampler.finish()
		r.WallProfile = &p
		b.printWallProfile("triggered and webhook one-object changes", &p)
	}
	if r.Triggered.Median > 0 {
		r.Webhook.OverTriggered = r.Webhook.Applied.Median / r.Triggered.Median
	}
	return nil
}

// oneChange commits a change to one ConfigMap, makes the Sync pick it up
// as how says, and times it until the ConfigMap changed and the Sync was
// Ready at the commit.
func (b *bench) oneChange(ctx context.Context, l *live, n int, how trigger) (changeRun, error) {
	var run changeRun
	app := (n * 37) % l.work.apps
	ns, name := l.work.namespaceOf(app), appName(app)
	version := fmt.Sprintf("v%d", n+1)
	cms := b.env.Clientset.CoreV1().ConfigMaps(ns)
	// Watch from the list's resourceVersion: an object's own one may be
	// older than the API server's watch window.
	one := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := cms.List(ctx, one)
	if err != nil {
		return run, err
	}
	one.ResourceVersion = list.ResourceVersion
	w, err := cms.Watch(ctx, one)
	if err != nil {
		return run, err
	}
	defer w.Stop()
	if how == atInterval {
		// Land the commit at a random point of the interval, as a
		// developer's merge would.
		select {
		case <-ctx.Done():
			return run, ctx.Err()
		case <-time.After(rand.N(b.o.interval)):
		}
	}
	before, _ := l.agent.requests.snapshot()
	rev, err := l.repo.commit(fmt.Sprintf("%s: config %s", name, version), l.work.changed(app, version))
	if err != nil {
		return run, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// The ConfigMap's watch is read while the trigger runs and the Sync's
	// is awaited, so that each event is timed when it arrives.
	type result struct {
		at  time.Time
		err error
	}
	applied := make(chan result, 1)
	go func() {
		at, err := untilEvent(waitCtx, w, func(obj any) bool {
			cm, ok := obj.(*corev1.ConfigMap)
			return ok && cm.Data["CONFIG_VERSION"] == version
		})
		applied <- result{at, err}
	}()
	start := time.Now()
	switch how {
	case specEdit:
		err = b.nudge(ctx, l.sync, n)
	case pushNotice:
		run.reply, err = b.push(ctx, l, rev, n)
	}
	if err != nil {
		cancel()
		<-applied
		return run, err
	}
	s, ready, err := l.watch.until(waitCtx, rev, func(s *v1alpha1.Sync) bool { return syncedAt(s, rev) })
	if err != nil {
		cancel()
		<-applied
		return run, err
	}
	a := <-applied
	if a.err != nil {
		return run, fmt.Errorf("waiting for ConfigMap %s/%s at %s: %w", ns, name, version, a.err)
	}
	if len(s.Status.History) > 0 {
		run.engine, _ = time.ParseDuration(s.Status.History[0].Duration)
	}
	time.Sleep(time.Second) // events are sent asynchronously
	after, _ := l.agent.requests.snapshot()
	l.revision = rev
	run.applied, run.ready, run.requests = a.at.Sub(start), ready.Sub(start), after.minus(before)
	return run, nil
}

// nudge edits the Sync's spec (its timeout) so that it syncs at once, as
// a webhook would make it.
func (b *bench) nudge(ctx context.Context, name string, n int) error {
	base := b.o.syncTimeout
	if base <= 0 {
		base = 5 * time.Minute // the API's default
	}
	patch := fmt.Appendf(nil, `{"spec":{"timeout":"%s"}}`, base+time.Duration(n)*time.Second)
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: name}}
	return b.admin.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch))
}

// untilEvent returns when the first watch event whose object satisfies
// done arrived.
func untilEvent(ctx context.Context, w watch.Interface, done func(any) bool) (time.Time, error) {
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return time.Time{}, errors.New("watch closed")
			}
			at := time.Now()
			if ev.Type == watch.Error {
				return time.Time{}, fmt.Errorf("watch error: %v", ev.Object)
			}
			if done(ev.Object) {
				return at, nil
			}
		}
	}
}
