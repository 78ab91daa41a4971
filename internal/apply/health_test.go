package apply

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

func TestHealthOfJudgesAsTheWaitDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  string
		want status.Status
	}{
		{"a ConfigMap is Current once it exists", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", status.CurrentStatus},
		{"a Deployment no controller has seen is InProgress", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a, generation: 1}\nspec: {replicas: 1}\n", status.InProgressStatus},
		{"a running Job is InProgress until it succeeds",
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, generation: 1}\nstatus: {observedGeneration: 1, active: 1, startTime: '2026-01-01T00:00:00Z'}\n", status.InProgressStatus},
		{"a Job that succeeded is Current",
			"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, generation: 1}\nstatus: {observedGeneration: 1, succeeded: 1, startTime: '2026-01-01T00:00:00Z', conditions: [{type: Complete, status: 'True'}]}\n", status.CurrentStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := yaml.YAMLToJSON([]byte(tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatal(err)
			}
			if got, msg := HealthOf(u); got != tc.want {
				t.Errorf("HealthOf = %s (%s), want %s", got, msg, tc.want)
			}
		})
	}
}
