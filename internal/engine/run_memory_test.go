package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/render"
)

// deployment is a Deployment of the Sync fleet in ns, of the size and
// shape of an app's (twenty-odd nested maps), decoded.
func deployment(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	doc := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {driftless.dev/sync: %[2]s.fleet, app.kubernetes.io/name: %[1]s, app.kubernetes.io/part-of: shop}
  annotations: {driftless.dev/origin: "apps/%[1]s.yaml#0"}
spec:
  replicas: 0
  selector: {matchLabels: {app.kubernetes.io/name: %[1]s}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/part-of: shop}
    spec:
      containers:
      - name: app
        image: registry.example/%[1]s:1.0.0
        ports: [{name: http, containerPort: 8080}]
        env: [{name: LOG_LEVEL, value: info}, {name: APP, value: %[1]s}]
        resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 64Mi}}
        readinessProbe: {httpGet: {path: /ready, port: http}, periodSeconds: 5}
        livenessProbe: {httpGet: {path: /live, port: http}, periodSeconds: 10}
`, name, ns)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// liveHeap is the heap a full collection finds live.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestALargeSyncDoesNotHoldItsRenderDecodedWhileItWrites checks that
// what a sync holds while it writes grows with its objects' JSON, not
// with their decoded maps (which cost about five times as much): the
// agent's peak memory over a Sync of ten thousand objects was mostly the
// render held decoded from the first request to the last.
func TestALargeSyncDoesNotHoldItsRenderDecodedWhileItWrites(t *testing.T) {
	const n = 1000
	ns := env.Namespace(t)
	objects := make([]*unstructured.Unstructured, n)
	for i := range objects {
		objects[i] = deployment(t, ns, fmt.Sprintf("app-%04d", i))
	}
	decoded := liveHeap()
	runtime.KeepAlive(objects)
	objects = nil
	base := liveHeap()
	decoded -= min(decoded, base)
	// The same objects again, handed to the sync: the test keeps none.
	// Its requests in flight are fixed, so that what the bound allows
	// for them does not move with the default.
	const concurrency = 32
	in := engine.Input{Sync: syncIn(ns), Objects: make([]render.Object, n), Concurrency: concurrency}
	for i := range in.Objects {
		name := fmt.Sprintf("app-%04d", i)
		in.Objects[i] = rendered(t, deployment(t, ns, name), "apps/"+name+".yaml")
	}
	var writes atomic.Int64
	var held atomic.Uint64
	in.Written = func(*metav1.PartialObjectMetadata) {
		if writes.Add(1) == n/2 {
			held.Store(liveHeap())
		}
	}
	res := engine.Run(context.Background(), c, in)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if writes.Load() != n {
		t.Fatalf("%d objects written, want %d", writes.Load(), n)
	}
	got := held.Load() - min(held.Load(), base)
	t.Logf("%d Deployments: %d KiB decoded; the sync held %d KiB half-way through its writes", n, decoded>>10, got>>10)
	// The objects' JSON and the plan's and the apply's own records are
	// about a third of the decoded objects; the bound is generous. The
	// objects being written are held decoded, by design: one per request
	// in flight, whatever the sync's size.
	inFlight := decoded / n * concurrency
	if got > decoded*2/3+inFlight {
		t.Errorf("half-way through writing %d objects the sync held %d KiB, more than two thirds of the %d KiB of its render decoded "+
			"and the %d KiB of the %d objects in flight: the render is held decoded through the apply", n, got>>10, decoded>>10, inFlight>>10, concurrency)
	}
}
