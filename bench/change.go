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
	// up at its next interval (there is no webhook yet): on average half
	// an interval plus the sync.
	NextInterval timing `json:"next_interval_s"`
	// Triggered: commit, then a spec edit that syncs at once, as a webhook
	// would → the ConfigMap changed.
	Triggered timing `json:"triggered_s"`
	// Engine is the triggered syncs' own duration, from their status.
	Engine timing `json:"triggered_engine_s"`
	// Requests are driftless's own requests for the last triggered change,
	// from the commit until the Sync's status recorded it.
	Requests requestSummary `json:"driftless_requests"`
	Interval float64        `json:"interval_s"`
	// WallProfile covers the triggered changes, with -profile.
	WallProfile *wallProfile `json:"wall_profile,omitempty"`
}

// change commits one-object changes: first repeats picked up at the next
// interval, then repeats triggered at once.
func (b *bench) change(ctx context.Context, l *live, r *change) error {
	r.Interval = b.o.interval.Seconds()
	n := 0
	for _, triggered := range []bool{false, true} {
		repeats := b.o.repeats
		if !triggered {
			repeats = b.o.intervalChanges
		}
		var sampler *wallSampler
		stopCPU := func() {}
		if triggered && b.o.profileDir != "" {
			sampler = startWallSampler(10 * time.Millisecond)
			var err error
			if stopCPU, err = b.prof.cpu(fmt.Sprintf("cpu-change-%d", b.size)); err != nil {
				return err
			}
		}
		for rep := 0; rep < repeats; rep++ {
			n++
			d, engine, reqs, err := b.oneChange(ctx, l, n, triggered)
			if err != nil {
				return err
			}
			if triggered {
				r.Triggered.add(d)
				r.Engine.add(engine)
				r.Requests = summarize(reqs)
				step("change, triggered: %.2f s (engine %.2f s, %d requests)", d.Seconds(), engine.Seconds(), reqs.total())
			} else {
				r.NextInterval.add(d)
				step("change, next interval: %.2f s (engine %.2f s, %d requests)", d.Seconds(), engine.Seconds(), reqs.total())
			}
		}
		stopCPU()
		if sampler != nil {
			p := sampler.finish()
			r.WallProfile = &p
			b.printWallProfile("triggered one-object changes", &p)
		}
	}
	return nil
}

func (b *bench) oneChange(ctx context.Context, l *live, n int, triggered bool) (time.Duration, time.Duration, requestCounts, error) {
	app := (n * 37) % l.work.apps
	ns, name := l.work.namespaceOf(app), appName(app)
	version := fmt.Sprintf("v%d", n+1)
	cms := b.env.Clientset.CoreV1().ConfigMaps(ns)
	// Watch from the list's resourceVersion: an object's own one may be
	// older than the API server's watch window.
	one := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := cms.List(ctx, one)
	if err != nil {
		return 0, 0, nil, err
	}
	one.ResourceVersion = list.ResourceVersion
	w, err := cms.Watch(ctx, one)
	if err != nil {
		return 0, 0, nil, err
	}
	defer w.Stop()
	if !triggered {
		// Land the commit at a random point of the interval, as a
		// developer's merge would.
		select {
		case <-ctx.Done():
			return 0, 0, nil, ctx.Err()
		case <-time.After(rand.N(b.o.interval)):
		}
	}
	before, _ := l.agent.requests.snapshot()
	rev, err := l.repo.commit(fmt.Sprintf("%s: config %s", name, version), l.work.changed(app, version))
	if err != nil {
		return 0, 0, nil, err
	}
	start := time.Now()
	if triggered {
		if err := b.nudge(ctx, l.sync, n); err != nil {
			return 0, 0, nil, err
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	at, err := untilEvent(waitCtx, w, func(obj any) bool {
		cm, ok := obj.(*corev1.ConfigMap)
		return ok && cm.Data["CONFIG_VERSION"] == version
	})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("waiting for ConfigMap %s/%s at %s: %w", ns, name, version, err)
	}
	s, _, err := l.watch.until(waitCtx, rev, func(s *v1alpha1.Sync) bool { return syncedAt(s, rev) })
	if err != nil {
		return 0, 0, nil, err
	}
	var engine time.Duration
	if len(s.Status.History) > 0 {
		engine, _ = time.ParseDuration(s.Status.History[0].Duration)
	}
	time.Sleep(time.Second) // events are sent asynchronously
	after, _ := l.agent.requests.snapshot()
	l.revision = rev
	return at.Sub(start), engine, after.minus(before), nil
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
