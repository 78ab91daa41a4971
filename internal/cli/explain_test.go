package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// webDeployment is a Deployment manifest with two replicas.
const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`

// explainJSON is `driftless explain -o json` as a test reads it.
type explainJSON struct {
	Object        string
	Sync          string
	SyncFound     bool
	Origin        string
	Revision      string
	LastApplied   *time.Time
	InInventory   bool
	ListedBy      []string
	FieldManagers []struct {
		Manager, Operation string
		Fields             []string
	}
	Drift []struct {
		Action, Message string
		Fields          []string
	}
	SyncNotReady *struct{ Status, Reason, Message string }
}

func explain(t *testing.T, code int, args ...string) (explainJSON, cliResult) {
	t.Helper()
	r := runCLI(t, append(append([]string{"explain"}, args...), "-o", "json", "--kubeconfig", env.ControlPlane.KubeconfigPath())...).expect(t, code)
	var doc explainJSON
	if code == 0 {
		if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
			t.Fatalf("-o json: %v\n%s", err, r.out)
		}
	}
	return doc, r
}

func (e explainJSON) fieldsOf(manager string) []string {
	for _, m := range e.FieldManagers {
		if m.Manager == manager {
			return m.Fields
		}
	}
	return nil
}

func TestExplainOfAManagedDeploymentEditedByHandNamesTheSyncTheFileAndTheOtherManager(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	sha := repo.Commit(t, "web", map[string]string{"workloads/web.yaml": webDeployment, "workloads/config.yaml": diffConfigMap("", "web-config", "v1")})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	diffSyncOnce(t, cl, key)

	// Someone scales it by hand; the drift controller recorded that and
	// an incident on another object.
	ctx := context.Background()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`))
	dep := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	if err := cl.Patch(ctx, dep, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	var s v1alpha1.Sync
	if err := cl.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	s.Status.Drift = append([]v1alpha1.DriftIncident{
		{Time: metav1.Now(), Object: "Deployment/" + ns + "/web", Action: v1alpha1.DriftReverted, Origin: "workloads/web.yaml",
			Fields: []v1alpha1.DriftField{{Path: "spec.replicas", Git: "2", Found: "5", Manager: "kubectl-edit"}}, Message: "kubectl-edit changed /spec/replicas"},
		{Time: metav1.Now(), Object: "ConfigMap/" + ns + "/web-config", Action: v1alpha1.DriftReverted, Message: "not about web"},
	}, s.Status.Drift...)
	if err := cl.Status().Update(ctx, &s); err != nil {
		t.Fatal(err)
	}

	for _, kind := range []string{"deploy", "Deployment", "deployments.apps", "deployment.v1.apps"} {
		t.Run("written as "+kind, func(t *testing.T) {
			got, _ := explain(t, 0, kind+"/web", "-n", ns)
			if got.Object != "Deployment/"+ns+"/web" || got.Sync != key.String() || !got.SyncFound || !got.InInventory {
				t.Errorf("explain %s/web = object %q, sync %q (found %v, in inventory %v); want Deployment/%s/web of %s, in its inventory",
					kind, got.Object, got.Sync, got.SyncFound, got.InInventory, ns, key)
			}
		})
	}

	got, _ := explain(t, 0, "deploy/web", "-n", ns)
	if got.Origin != "workloads/web.yaml#0" || got.Revision != sha[:7] {
		t.Errorf("from %q at %q, want workloads/web.yaml#0 at %s", got.Origin, got.Revision, sha[:7])
	}
	if got.LastApplied == nil || time.Since(*got.LastApplied) > time.Minute {
		t.Errorf("last applied = %v, want the sync a moment ago", got.LastApplied)
	}
	if edited := got.fieldsOf("kubectl-edit"); !slices.Contains(edited, "spec.replicas") {
		t.Errorf("kubectl-edit owns %v, want spec.replicas among them: %+v", edited, got.FieldManagers)
	}
	if own := got.fieldsOf("driftless"); !slices.Contains(own, "spec.template") || slices.Contains(own, "spec.replicas") {
		t.Errorf("driftless owns %v, want spec.template and no longer spec.replicas", own)
	}
	if len(got.Drift) != 1 || got.Drift[0].Message != "kubectl-edit changed /spec/replicas" || !slices.Equal(got.Drift[0].Fields, []string{"spec.replicas"}) {
		t.Errorf("drift = %+v, want only the incident on the Deployment", got.Drift)
	}
	if got.SyncNotReady != nil {
		t.Errorf("a Ready Sync is reported not Ready: %+v", got.SyncNotReady)
	}

	table := runCLI(t, "explain", "deploy/web", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	for _, want := range []string{"Managed by: Sync " + key.String(), "workloads/web.yaml#0 at revision " + sha[:7], "kubectl-edit", "spec.replicas", "kubectl-edit changed /spec/replicas"} {
		if !strings.Contains(oneSpaced(table.out), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.out)
		}
	}

	// A commit that does not render: the Sync fails and says where.
	repo.Commit(t, "broken", map[string]string{"workloads/broken.yaml": "kind: [\n"})
	if c := diffReconcile(t, cl, key); c.Status == metav1.ConditionTrue {
		t.Fatalf("the broken commit synced: %s", c.Message)
	}
	got, _ = explain(t, 0, "deploy/web", "-n", ns)
	if got.SyncNotReady == nil || got.SyncNotReady.Status != "False" || !strings.Contains(got.SyncNotReady.Message, "workloads/broken.yaml") {
		t.Errorf("the failing Sync's Ready = %+v, want False naming workloads/broken.yaml", got.SyncNotReady)
	}
}

func TestExplainOfAnObjectNoSyncManagesSaysSoAndWhetherAnInventoryListsIt(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, name := range []string{"by-hand", "left-behind"} {
		if err := cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	old := createSyncWithStatus(t, ns, "old", false, v1alpha1.SyncStatus{Inventory: []v1alpha1.InventoryEntry{{ID: "/ConfigMap/" + ns + "/left-behind", Version: "v1"}}})
	legacy := createSyncWithStatus(t, ns, "legacy", false, v1alpha1.SyncStatus{Inventory: []v1alpha1.InventoryEntry{
		{ID: "garbage", Version: "v1"}, {ID: ns + "_left-behind__ConfigMap", Version: "v1"}}})

	got, r := explain(t, 0, "configmap/by-hand", "-n", ns)
	if got.Sync != "" || len(got.ListedBy) != 0 {
		t.Errorf("an object made by hand: sync %q, listed by %v; want neither", got.Sync, got.ListedBy)
	}
	table := runCLI(t, "explain", "cm/by-hand", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	for _, want := range []string{"Managed by: no Sync", "in no Sync's inventory"} {
		if !strings.Contains(oneSpaced(table.out), want) {
			t.Errorf("the table lacks %q:\n%s%s", want, table.out, r.errOut)
		}
	}

	got, _ = explain(t, 0, "configmap/left-behind", "-n", ns)
	if want := []string{legacy.String(), old.String()}; got.Sync != "" || !slices.Equal(got.ListedBy, want) {
		t.Errorf("an unlabelled object inventories list (one in the legacy form): sync %q, listed by %v; want no sync, listed by %v", got.Sync, got.ListedBy, want)
	}
	table = runCLI(t, "explain", "cm/left-behind", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	if want := "still listed by Sync " + legacy.String() + ", " + old.String(); !strings.Contains(oneSpaced(table.out), want) {
		t.Errorf("the table lacks %q:\n%s", want, table.out)
	}
}

func TestExplainOfWhatCannotBeReadExitsTwoAndSaysWhy(t *testing.T) {
	diffClusterClient(t)
	ns := env.Namespace(t)
	// A kubeconfig whose user may read nothing.
	cfg, err := clientcmd.LoadFromFile(env.ControlPlane.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "nobody"
	}
	nobody := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(nobody, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"an object that does not exist", []string{"configmap/nosuch", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()},
			[]string{"no ConfigMap named nosuch in namespace " + ns}},
		{"a kind the cluster does not have", []string{"frobnicator/x", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()},
			[]string{`has no kind "frobnicator"`, "kubectl api-resources"}},
		{"an object in a namespace you may not read", []string{"configmap/any", "-n", ns, "--kubeconfig", nobody},
			[]string{"you may not read ConfigMap any in namespace " + ns}},
		{"an argument without a kind", []string{"web", "--kubeconfig", env.ControlPlane.KubeconfigPath()},
			[]string{"KIND/NAME"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"explain"}, tc.args...)...).expect(t, 2)
			for _, want := range tc.want {
				if !strings.Contains(r.errOut, want) {
					t.Errorf("error lacks %q: %s", want, r.errOut)
				}
			}
			if strings.Contains(r.errOut, "goroutine") || strings.Count(r.errOut, "\n") > 1 {
				t.Errorf("the error is more than one line: %s", r.errOut)
			}
		})
	}
}

// oneSpaced is s with every run of white space one space, to read text
// aligned in columns.
func oneSpaced(s string) string { return strings.Join(strings.Fields(s), " ") }
