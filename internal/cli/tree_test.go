package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/syncview"
	"github.com/driftless/driftless/internal/testenv"
)

func TestTreeShowsTheDependenciesThenEachObjectWithItsHealthAndFile(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "web", map[string]string{
		"workloads/web.yaml":    webDeployment,
		"workloads/config.yaml": diffConfigMap("", "web-config", "v1") + "---\n" + diffConfigMap("", "gone", "v1"),
	})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	diffSyncOnce(t, cl, key)
	base := createSyncWithStatus(t, ns, "base", false, v1alpha1.SyncStatus{Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded, Message: "applied", LastTransitionTime: metav1.Now()}}})

	ctx := context.Background()
	var s v1alpha1.Sync
	if err := cl.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: base.Name}}
	if err := cl.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}); err != nil {
		t.Fatal(err)
	}

	js := runCLI(t, "tree", key.String(), "-o", "json", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	var doc treeReport
	if err := json.Unmarshal([]byte(js.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, js.out)
	}
	if want := []syncview.Dependency{{Sync: base.String(), Ready: "True", Reason: v1alpha1.ReasonSucceeded, Found: true}}; !cmp.Equal(want, doc.DependsOn) {
		t.Errorf("dependsOn (-want +got):\n%s", cmp.Diff(want, doc.DependsOn))
	}
	type shown struct{ Kind, Name, Health, Origin string }
	var got []shown
	for _, o := range doc.Objects {
		if o.Namespace != ns {
			t.Errorf("%s/%s is in namespace %q, want %s", o.Kind, o.Name, o.Namespace, ns)
		}
		got = append(got, shown{o.Kind, o.Name, o.Health, o.Origin})
	}
	want := []shown{
		{"ConfigMap", "gone", "Missing", ""},
		{"ConfigMap", "web-config", "Current", "workloads/config.yaml#0"},
		// No controller runs here: the Deployment never rolls out.
		{"Deployment", "web", "InProgress", "workloads/web.yaml#0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s\n%s", diff, js.out)
	}

	table := runCLI(t, "tree", key.String(), "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	lines := strings.Split(strings.TrimSpace(table.out), "\n")
	wantLines := []string{
		"Sync " + key.String() + " (Ready: True, revision ",
		"├─ depends on Sync " + base.String() + " (Ready: True)",
		"└─ namespace " + ns,
		"   ├─ ConfigMap/gone",
		"   ├─ ConfigMap/web-config",
		"   └─ Deployment.apps/web",
	}
	if len(lines) != len(wantLines) {
		t.Fatalf("tree has %d lines, want %d:\n%s", len(lines), len(wantLines), table.out)
	}
	for i, w := range wantLines {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start with %q", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[3], "Missing") || !strings.Contains(lines[5], "InProgress") {
		t.Errorf("the tree lacks the health of the objects:\n%s", table.out)
	}
}

func TestTreeOfASyncThatDoesNotExistExitsTwo(t *testing.T) {
	diffClusterClient(t)
	ns := env.Namespace(t)
	r := runCLI(t, "tree", ns+"/nosuch", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 2)
	if !strings.Contains(r.errOut, "no Sync named nosuch in namespace "+ns) {
		t.Errorf("error = %s", r.errOut)
	}
}

func TestTreeReadsLegacyInventoryEntriesAndSaysWhichItCannotRead(t *testing.T) {
	ns := env.Namespace(t)
	key := createSyncWithStatus(t, ns, "legacy", false, v1alpha1.SyncStatus{Inventory: []v1alpha1.InventoryEntry{
		{ID: ns + "_old-config__ConfigMap", Version: "v1"}, {ID: "garbage", Version: "v1"}}})

	js := runCLI(t, "tree", key.String(), "-o", "json", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	var doc treeReport
	if err := json.Unmarshal([]byte(js.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, js.out)
	}
	if len(doc.Objects) != 1 || doc.Objects[0].Kind != "ConfigMap" || doc.Objects[0].Name != "old-config" || doc.Objects[0].Namespace != ns {
		t.Errorf("objects = %+v, want the legacy entry's ConfigMap %s/old-config", doc.Objects, ns)
	}
	if len(doc.Unreadable) != 1 || !strings.Contains(doc.Unreadable[0], `"garbage"`) {
		t.Errorf("unreadable = %q, want one line naming the entry \"garbage\"", doc.Unreadable)
	}
	table := runCLI(t, "tree", key.String(), "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	if !strings.Contains(table.out, `unreadable: inventory entry "garbage"`) {
		t.Errorf("the tree does not show the unreadable entry:\n%s", table.out)
	}
}
