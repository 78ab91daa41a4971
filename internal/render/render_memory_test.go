package render

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// appDeployment is a Deployment of the size and shape of an app's
// (twenty-odd nested maps).
func appDeployment(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/part-of: shop}
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
`, name)
}

// liveHeap is the heap a full collection finds live.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// heapAtLastKind is the cluster's discovery that reads the live heap when
// the render asks about the kind of its last object.
type heapAtLastKind struct {
	last schema.GroupKind
	heap *uint64
}

func (s heapAtLastKind) Namespaced(gk schema.GroupKind) (bool, error) {
	if gk == s.last {
		*s.heap = liveHeap()
	}
	return cluster.Namespaced(gk)
}

// TestARenderDoesNotHoldEveryObjectDecoded checks that what a render
// holds as it settles its last object grows with its objects' JSON, not
// with their decoded maps (which cost about five times as much): the
// agent's peak memory over a Sync of ten thousand objects was the render
// holding every object decoded until it had read them all.
func TestARenderDoesNotHoldEveryObjectDecoded(t *testing.T) {
	const n = 1000
	files := map[string]string{"zz-last.yaml": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: last}\n"}
	for i := range n {
		name := fmt.Sprintf("app-%04d", i)
		files["apps/"+name+".yaml"] = appDeployment(name)
	}
	root := checkout(t, files)
	files = nil

	objects := make([]any, n)
	for i := range objects {
		v, _, err := decodeYAML(document{data: []byte(appDeployment(fmt.Sprintf("app-%04d", i))), line: 1})
		if err != nil {
			t.Fatal(err)
		}
		objects[i] = v
	}
	decoded := liveHeap()
	runtime.KeepAlive(objects)
	objects = nil
	base := liveHeap()
	decoded -= min(decoded, base)

	var held uint64
	scope := heapAtLastKind{last: schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, heap: &held}
	got, err := Render(Options{Root: root, Scope: scope, SyncLabel: "fleet.shop", Revision: "0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n+1 {
		t.Fatalf("%d objects rendered, want %d", len(got), n+1)
	}
	if held == 0 {
		t.Fatalf("the render never asked the scope of its last object (%s): the heap was not measured", scope.last)
	}
	held -= min(held, base)
	t.Logf("%d Deployments: %d KiB decoded; the render held %d KiB as it settled the last object", n, decoded>>10, held>>10)
	// The objects' JSON is about a fifth of the decoded objects, the
	// labels and annotation the render adds a little more; the bound is
	// generous.
	if held > decoded/2 {
		t.Errorf("settling the last of %d objects the render held %d KiB, more than half of the %d KiB of its objects decoded: "+
			"the render holds every object decoded", n, held>>10, decoded>>10)
	}
}
