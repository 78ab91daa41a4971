package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// For a kind the Sync's spec.healthChecks name, tree and explain show
// the health the expressions decide and the expression that decided it,
// not kstatus's (which calls an object with only a status.phase Current).
func TestTreeAndExplainShowTheHealthCheckThatDecided(t *testing.T) {
	cl := diffClusterClient(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	group := "tree" + strings.ReplaceAll(ns, "-", "") + ".example.com"
	crd := testenv.PhaseCRD(group)
	if err := cl.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), crd) })
	testenv.Eventually(t, time.Minute, "CRD "+crd.Name+" Established", func() string {
		if !established(ctx, cl, crd.Name) {
			return "not Established"
		}
		return ""
	})
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "a migration", map[string]string{
		"workloads/migrate.yaml": "apiVersion: " + group + "/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  image: migrate:1\n",
	})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	var s v1alpha1.Sync
	if err := cl.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.HealthChecks = []v1alpha1.HealthCheck{{APIVersion: group + "/v1", Kind: "Job",
		Current: "status.phase == 'Running'", InProgress: "status.phase == 'Pending'", Failed: "status.phase == 'Failed'"}}
	if err := cl.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	diffSyncOnce(t, cl, key) // one wave, no spec.wait: applied without waiting
	job := &unstructured.Unstructured{}
	job.SetAPIVersion(group + "/v1")
	job.SetKind("Job")
	job.SetNamespace(ns)
	job.SetName("migrate")
	if err := cl.Status().Patch(ctx, job, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`))); err != nil {
		t.Fatal(err)
	}
	const decided = "spec.healthChecks[0].failed is true (status.phase == 'Failed')"

	js := runCLI(t, "tree", key.String(), "-o", "json", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	var doc treeReport
	if err := json.Unmarshal([]byte(js.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, js.out)
	}
	if len(doc.Objects) != 1 || doc.Objects[0].Health != "Failed" || doc.Objects[0].Message != decided {
		t.Errorf("tree shows %+v, want the Job Failed: %s", doc.Objects, decided)
	}

	out := runCLI(t, "explain", "jobs."+group+"/migrate", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	if want := "Health: *Failed: " + regexp.QuoteMeta(decided) + "\n"; !regexp.MustCompile(want).MatchString(out.out) {
		t.Errorf("explain printed:\n%s\nwant a line %q", out.out, want)
	}
}

func established(ctx context.Context, cl client.Client, name string) bool {
	var got apiextensionsv1.CustomResourceDefinition
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
		return false
	}
	for _, c := range got.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
