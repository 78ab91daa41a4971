package syncview

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFieldPathsAreTwoLevelsDeepAndReadable(t *testing.T) {
	for _, tc := range []struct {
		name, fields string
		want         []string
	}{
		{"a scalar under spec", `{"f:spec":{"f:replicas":{}}}`, []string{"spec.replicas"}},
		{"deeper fields stop at two levels", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{}}}},"f:metadata":{"f:labels":{"f:app":{}},"f:annotations":{".":{},"f:x":{}}}}`,
			[]string{"metadata.annotations", "metadata.labels", "spec.template"}},
		{"list items are […]", `{"f:spec":{"f:ports":{"k:{\"port\":80}":{}}},"f:subsets":{"i:0":{}}}`, []string{"spec.ports", "subsets[…]"}},
		{"a top-level field alone", `{"f:data":{}}`, []string{"data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FieldPaths(metav1.NewFieldsV1(tc.fields))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FieldPaths (-want +got):\n%s", diff)
			}
		})
	}
}
