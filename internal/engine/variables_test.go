package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/render"
)

func TestVariables(t *testing.T) {
	reader := fake.NewClientBuilder().WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "common"}, Data: map[string]string{"region": "eu", "tier": "gold", "team": "a"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "creds"}, Data: map[string][]byte{"tier": []byte("s3cret"), "token": []byte("t0ken")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bad-keys"}, Data: map[string]string{"app.conf": "x"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"}, Data: map[string]string{"x": "y"}},
	).Build()
	sync := func(sub map[string]string, from ...v1alpha1.SubstituteReference) *v1alpha1.Sync {
		return &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: v1alpha1.SyncSpec{Substitute: sub, SubstituteFrom: from}}
	}
	tests := []struct {
		name    string
		sync    *v1alpha1.Sync
		want    map[string]render.Variable
		wantErr string
	}{
		{"a Sync with neither field substitutes nothing", sync(nil), nil, ""},
		{"later entries override earlier ones and spec.substitute overrides all",
			sync(map[string]string{"team": "b"}, v1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "common"}, v1alpha1.SubstituteReference{Kind: "Secret", Name: "creds"}),
			map[string]render.Variable{"region": {Value: "eu"}, "tier": {Value: "s3cret", Secret: true}, "token": {Value: "t0ken", Secret: true}, "team": {Value: "b"}}, ""},
		{"a missing optional object is skipped",
			sync(nil, v1alpha1.SubstituteReference{Kind: "Secret", Name: "gone", Optional: true}), map[string]render.Variable{}, ""},
		{"a missing object is an error naming it",
			sync(nil, v1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "gone"}), nil,
			"ConfigMap shop/gone of spec.substituteFrom[0] does not exist; create it, or mark the entry optional: true"},
		{"objects are read in the Sync's namespace only",
			sync(nil, v1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "elsewhere"}), nil, "ConfigMap shop/elsewhere of spec.substituteFrom[0] does not exist"},
		{"a key that is not a variable name is an error naming it",
			sync(nil, v1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "bad-keys"}), nil,
			`ConfigMap shop/bad-keys of spec.substituteFrom[0] has key "app.conf", which is not a variable name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Variables(context.Background(), reader, tt.sync)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("variables (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVariablesDigestChangesWithAnyValueAndWithWhereItCameFrom(t *testing.T) {
	base := map[string]render.Variable{"a": {Value: "1"}}
	digests := map[string]string{
		"none":               VariablesDigest(nil),
		"empty":              VariablesDigest(map[string]render.Variable{}),
		"a=1":                VariablesDigest(base),
		"a=2":                VariablesDigest(map[string]render.Variable{"a": {Value: "2"}}),
		"a=1 from a Secret":  VariablesDigest(map[string]render.Variable{"a": {Value: "1", Secret: true}}),
		"a=1 and b=":         VariablesDigest(map[string]render.Variable{"a": {Value: "1"}, "b": {}}),
		"a=1, b= as one key": VariablesDigest(map[string]render.Variable{"a": {Value: "1b="}}),
	}
	seen := map[string]string{}
	for name, d := range digests {
		if other, ok := seen[d]; ok {
			t.Errorf("%s and %s have the same digest", name, other)
		}
		seen[d] = name
	}
	if VariablesDigest(base) != digests["a=1"] {
		t.Error("the digest of the same variables changed")
	}
}
