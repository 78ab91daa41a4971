package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRenderNamesObjectsForPeople(t *testing.T) {
	files := map[string]string{"app.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: core}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: no-dot}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kubernetes-own}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: kubernetes-own-too}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: under-k8s-io}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: third-party}
`}
	want := []string{
		"ConfigMap/default/core",
		"PodDisruptionBudget/default/no-dot",
		"ClusterRole/kubernetes-own",
		"ValidatingAdmissionPolicy/kubernetes-own-too",
		"HTTPRoute/default/under-k8s-io",
		"ServiceMonitor.monitoring.coreos.com/default/third-party",
	}
	objs, err := render(t, files, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, ref(o.decoded()))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

// decoded returns the object o holds, decoded.
func (o Object) decoded() *unstructured.Unstructured {
	u, err := o.Decode()
	if err != nil {
		panic(err)
	}
	return u
}
