package apply_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/testenv/apimetrics"
)

// A wait for a wave reads the health of its objects with one LIST per
// kind and namespace each poll (about one a second), not one GET per
// object: a wave of 30 Deployments costs the API server about one read
// a second while it rolls out, not 30.
func TestAHealthWaitCostsOneReadPerKindAndPollNotOnePerObject(t *testing.T) {
	ns := env.Namespace(t)
	const deployments = 30
	objs := []render.Object{configMapInWave(t, ns, "after", 1)}
	for i := range deployments {
		name := fmt.Sprintf("api-%d", i)
		objs = append(objs, fromGit(t, ns, "apps/"+name+".yaml", fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: $NS, annotations: {driftless.dev/wave: "0"}}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: api, image: "api:1.0"}]
`, name)))
	}
	var (
		before  apimetrics.Counts
		started time.Time
	)
	m := newManager(ns, func(o *apply.Options) {
		// No controller rolls the Deployments out: the wait times out.
		o.Wait.Timeout = 4 * time.Second
		o.Wait.Progress = func(p apply.WaveProgress) {
			if p.Wave.Number == 0 && p.Healthy == 0 && before == nil {
				var err error
				if before, err = apimetrics.Read(context.Background(), env.Clientset); err != nil {
					t.Error(err)
				}
				started = time.Now()
			}
		}
	})

	_, err := m.Apply(context.Background(), planOf(objs...))
	if !errors.Is(err, apply.ErrHealthTimeout) {
		t.Fatalf("Apply = %v, want the wave of Deployments to time out", err)
	}
	after, rerr := apimetrics.Read(context.Background(), env.Clientset)
	if rerr != nil || before == nil {
		t.Fatalf("read the API server's request counts: %v (before the wait: %v)", rerr, before != nil)
	}
	elapsed := time.Since(started)
	d := after.Minus(before)
	reads := d[apimetrics.Key{Verb: "GET", Resource: "deployments"}] + d[apimetrics.Key{Verb: "LIST", Resource: "deployments"}]
	// The wait polls once a second: at most elapsed/1s + 1 polls, and a
	// read of each kind per poll, with room for one more each.
	polls := int(elapsed/time.Second) + 1
	t.Logf("a %s wait for %d Deployments: %d GETs and LISTs of Deployments", elapsed.Round(time.Millisecond), deployments, reads)
	if budget := 2 * polls; reads > budget {
		t.Errorf("a %s wait for %d Deployments cost %d GETs and LISTs of Deployments; want at most %d (one LIST per poll, room for one more)",
			elapsed.Round(time.Second), deployments, reads, budget)
	}
}
