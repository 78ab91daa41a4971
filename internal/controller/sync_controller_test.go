package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func deployment(ns, name, memory string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        resources:
          limits:
            memory: %[3]q
`, ns, name, memory)
}

func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  key: %q\n", name, value)
}

func memoryLimit(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatal("deployment has no containers")
	}
	mem, _, _ := unstructured.NestedString(containers[0].(map[string]any), "resources", "limits", "memory")
	return mem
}

func TestSyncCreatesUpdatesAndPrunesLikeTheSeedStory(t *testing.T) {
	h := newHarness(t)
	h.tenantMayWriteClusterWide() // its git holds a Namespace
	appNS := h.ns + "-app"
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}})
	})
	// The Namespace lives in a file that sorts after the Deployment using it.
	first := h.repo.Commit(t, "initial", map[string]string{
		"workloads/app.yaml":          deployment(appNS, "web", "512Mi"),
		"workloads/config.yaml":       configMap("web-config", "v1"),
		"workloads/zz-namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + appNS + "\n",
		"README.md":                   "not a manifest\n",
	})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"workloads"} })

	s := h.reconcile("fleet")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != first {
		t.Errorf("lastAppliedRevision = %s, want %s", s.Status.LastAppliedRevision, first)
	}
	deploy := get(t, "apps/v1", "Deployment", appNS, "web")
	if deploy == nil {
		t.Fatal("Deployment not created")
	}
	if got := memoryLimit(t, deploy); got != "512Mi" {
		t.Errorf("memory limit = %s, want 512Mi", got)
	}
	if got := deploy.GetLabels()[v1alpha1.SyncLabel]; got != h.ns+".fleet" {
		t.Errorf("sync label = %q, want %q", got, h.ns+".fleet")
	}
	if got, want := deploy.GetAnnotations()[v1alpha1.OriginAnnotation], "workloads/app.yaml#0@"+first[:7]; got != want {
		t.Errorf("origin annotation = %q, want %q", got, want)
	}
	if cm := get(t, "v1", "ConfigMap", h.ns, "web-config"); cm == nil {
		t.Error("ConfigMap without namespace was not created in spec.targetNamespace")
	}
	if inv := listed(t, s); len(inv) != 3 || s.Status.InventoryRef == nil || s.Status.InventoryRef.Entries != 3 {
		t.Errorf("inventory has %d entries (status counts %+v), want 3: %+v", len(inv), s.Status.InventoryRef, inv)
	}
	if len(s.Status.History) != 1 || s.Status.History[0].Created != 3 {
		t.Errorf("history = %+v, want one record with 3 created", s.Status.History)
	}
	eventsFor(t, h.ns, "fleet", "applied "+first[:7]+": 3 created, 0 configured, 0 unchanged, 0 pruned")

	// A limit change is a commit; only the changed object is written.
	cm := get(t, "v1", "ConfigMap", h.ns, "web-config")
	second := h.repo.Commit(t, "raise the limit", map[string]string{"workloads/app.yaml": deployment(appNS, "web", "1Gi")})
	s = h.reconcile("fleet")
	h.expectReady(s)
	if got := memoryLimit(t, get(t, "apps/v1", "Deployment", appNS, "web")); got != "1Gi" {
		t.Errorf("memory limit after the commit = %s, want 1Gi", got)
	}
	if rv := get(t, "v1", "ConfigMap", h.ns, "web-config").GetResourceVersion(); rv != cm.GetResourceVersion() {
		t.Errorf("unchanged ConfigMap was rewritten: resourceVersion %s → %s", cm.GetResourceVersion(), rv)
	}
	if rec := s.Status.History[0]; rec.Revision != second || rec.Configured != 1 || rec.Unchanged != 2 {
		t.Errorf("newest history record = %+v, want revision %s with 1 configured, 2 unchanged", rec, second)
	}

	// Removing a file prunes its object.
	h.repo.Commit(t, "drop the config", map[string]string{"workloads/config.yaml": ""})
	s = h.reconcile("fleet")
	h.expectReady(s)
	if get(t, "v1", "ConfigMap", h.ns, "web-config") != nil {
		t.Error("ConfigMap removed from git was not pruned")
	}
	if rec := s.Status.History[0]; rec.Pruned != 1 {
		t.Errorf("newest history record = %+v, want 1 pruned", rec)
	}
	if len(s.Status.History) != 3 {
		t.Errorf("history has %d records, want 3", len(s.Status.History))
	}
}

func TestIdenticalResyncWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "initial", map[string]string{
		"app.yaml":    deployment(h.ns, "web", "512Mi"),
		"config.yaml": configMap("web-config", "v1"),
	})
	h.createSync("fleet", nil)
	s := h.reconcile("fleet")
	h.expectReady(s)
	before := map[string]string{
		"deploy": get(t, "apps/v1", "Deployment", h.ns, "web").GetResourceVersion(),
		"cm":     get(t, "v1", "ConfigMap", h.ns, "web-config").GetResourceVersion(),
		"sync":   s.ResourceVersion,
	}
	s = h.reconcile("fleet")
	after := map[string]string{
		"deploy": get(t, "apps/v1", "Deployment", h.ns, "web").GetResourceVersion(),
		"cm":     get(t, "v1", "ConfigMap", h.ns, "web-config").GetResourceVersion(),
		"sync":   s.ResourceVersion,
	}
	for k := range before {
		if before[k] != after[k] {
			t.Errorf("%s resourceVersion changed on an identical re-sync: %s → %s", k, before[k], after[k])
		}
	}
}

func TestHandEditIsRevertedAtTheNextSync(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "initial", map[string]string{"app.yaml": deployment(h.ns, "web", "512Mi")})
	h.createSync("fleet", nil)
	h.expectReady(h.reconcile("fleet"))

	// kubectl edit, as the seed's team did.
	live := get(t, "apps/v1", "Deployment", h.ns, "web")
	containers, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
	_ = unstructured.SetNestedField(containers[0].(map[string]any), "2Gi", "resources", "limits", "memory")
	_ = unstructured.SetNestedSlice(live.Object, containers, "spec", "template", "spec", "containers")
	if err := c.Update(context.Background(), live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	s := h.reconcile("fleet")
	h.expectReady(s)
	if got := memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "web")); got != "512Mi" {
		t.Errorf("memory limit after the next sync = %s, want the 512Mi from git", got)
	}
	if rec := s.Status.History[0]; rec.Configured != 1 {
		t.Errorf("newest history record = %+v, want 1 configured", rec)
	}
}

func TestCRDAndItsCustomResourceInOneCommit(t *testing.T) {
	h := newHarness(t)
	h.tenantMayWriteClusterWide() // its git holds a CRD
	group := strings.ReplaceAll(h.ns, "-", "") + ".example.com"
	crd := testenv.CRDManifest(group, "Widget", "widgets")
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), get(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+group))
	})
	h.repo.Commit(t, "widgets", map[string]string{
		"a-widget.yaml": fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n", group),
		"z-crd.yaml":    crd,
	})
	h.createSync("fleet", nil)
	s := h.reconcile("fleet")
	h.expectReady(s)
	w := get(t, group+"/v1", "Widget", h.ns, "w1")
	if w == nil {
		t.Fatal("custom resource not created")
	}
	if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 3 {
		t.Errorf("spec.size = %d, want 3", size)
	}
}

func TestBadInputFailsNamingTheFileAndAppliesNothing(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		reason string
		wants  []string
	}{
		{
			name:   "broken YAML",
			files:  map[string]string{"broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: [unclosed\n"},
			reason: v1alpha1.ReasonBuildFailed,
			wants:  []string{"broken.yaml"},
		},
		{
			name:   "a document without kind",
			files:  map[string]string{"nokind.yaml": "apiVersion: v1\nmetadata:\n  name: x\n"},
			reason: v1alpha1.ReasonBuildFailed,
			wants:  []string{"nokind.yaml", "kind"},
		},
		{
			name: "a duplicate object",
			files: map[string]string{
				"dup-a.yaml": configMap("same", "a"),
				"dup-b.yaml": configMap("same", "b"),
			},
			reason: v1alpha1.ReasonBuildFailed,
			wants:  []string{"dup-a.yaml", "dup-b.yaml"},
		},
		{
			name:   "an unknown kind",
			files:  map[string]string{"gizmo.yaml": "apiVersion: example.com/v1\nkind: Gizmo\nmetadata:\n  name: g\n"},
			reason: v1alpha1.ReasonBuildFailed,
			wants:  []string{"gizmo.yaml", "Gizmo"},
		},
		{
			name: "a schema-invalid object",
			files: map[string]string{"invalid.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: bad\n" +
				"spec:\n  replicas: \"three\"\n  selector: {matchLabels: {app: bad}}\n  template:\n    metadata: {labels: {app: bad}}\n" +
				"    spec:\n      containers: [{name: app, image: nginx}]\n"},
			reason: v1alpha1.ReasonValidationFailed,
			wants:  []string{"invalid.yaml", "Deployment", "nothing was applied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			files := map[string]string{"good.yaml": configMap("good", "v1")}
			for k, v := range tt.files {
				files[k] = v
			}
			h.repo.Commit(t, "bad", files)
			h.createSync("fleet", nil)
			s := h.reconcile("fleet")
			h.expectFailed(s, tt.reason, tt.wants...)
			if get(t, "v1", "ConfigMap", h.ns, "good") != nil {
				t.Error("a valid object of the failing commit was applied; nothing should be")
			}
			eventsFor(t, h.ns, "fleet", tt.wants[0])
		})
	}
}

func TestUnreachableGitServerKeepsTheClusterAndRecovers(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "initial", map[string]string{"config.yaml": configMap("web-config", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		s.Spec.Source.Git.URL = h.repo.SSHURL()
		s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git"}
	})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: h.ns},
		Data:       map[string][]byte{"identity": h.srv.DeployKey, "known_hosts": h.srv.KnownHosts()},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.expectReady(h.reconcile("fleet"))
	cm := get(t, "v1", "ConfigMap", h.ns, "web-config")

	h.srv.StopSSH()
	s := h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonFetchFailed, h.srv.SSHAddr())
	// No part of the deploy key may reach what users read: the Ready
	// condition (which carries the fetch error), any other condition, the
	// history, or the events. Any 24 characters in a row of the key's
	// body give part of it away, and hold one of these 16-character
	// fragments.
	leaks := []string{"PRIVATE KEY"}
	for _, line := range strings.Split(string(h.srv.DeployKey), "\n") {
		for i := 0; !strings.HasPrefix(line, "-----") && i+16 <= len(line); i += 8 {
			leaks = append(leaks, line[i:i+16])
		}
	}
	for place, text := range map[string]string{
		"the Sync's status":    fmt.Sprintf("%+v", s.Status),
		"an event on the Sync": strings.Join(eventsFor(t, h.ns, "fleet", h.srv.SSHAddr()), "\n"),
	} {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s leaks the deploy key (%q):\n%s", place, leak, text)
				break
			}
		}
	}
	if s.Status.LastAppliedRevision != rev {
		t.Errorf("lastAppliedRevision = %s, want it kept at %s", s.Status.LastAppliedRevision, rev)
	}
	if got := get(t, "v1", "ConfigMap", h.ns, "web-config"); got == nil || got.GetResourceVersion() != cm.GetResourceVersion() {
		t.Error("the cluster was touched while git was unreachable")
	}

	if err := h.srv.StartSSH(); err != nil {
		t.Fatal(err)
	}
	next := h.repo.Commit(t, "after the outage", map[string]string{"config.yaml": configMap("web-config", "v2")})
	s = h.reconcile("fleet")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != next {
		t.Errorf("lastAppliedRevision = %s, want %s after recovery", s.Status.LastAppliedRevision, next)
	}
}

func TestSSHWithAWrongHostKeyIsRefused(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "initial", map[string]string{"config.yaml": configMap("web-config", "v1")})
	impostor := newHarness(t).srv
	wrong := strings.Replace(string(impostor.KnownHosts()), impostor.SSHAddr()[strings.LastIndex(impostor.SSHAddr(), ":")+1:],
		h.srv.SSHAddr()[strings.LastIndex(h.srv.SSHAddr(), ":")+1:], 1)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: h.ns},
		Data:       map[string][]byte{"identity": h.srv.DeployKey, "known_hosts": []byte(wrong)},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		s.Spec.Source.Git.URL = h.repo.SSHURL()
		s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git"}
	})
	s := h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonFetchFailed, "does not match known_hosts")
	if get(t, "v1", "ConfigMap", h.ns, "web-config") != nil {
		t.Error("objects were applied from a server whose host key did not match")
	}
}

func TestEmptyRenderIsRefusedAndDeletesNothing(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "initial", map[string]string{"apps/config.yaml": configMap("web-config", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })
	h.expectReady(h.reconcile("fleet"))

	h.repo.Commit(t, "oops", map[string]string{"apps/config.yaml": "", "apps/README.md": "moved\n"})
	s := h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonPruneRefused, "allowEmpty")
	if get(t, "v1", "ConfigMap", h.ns, "web-config") == nil {
		t.Fatal("an empty render deleted the ConfigMap")
	}

	// With allowEmpty the same render prunes.
	var cur v1alpha1.Sync
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "fleet"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.AllowEmpty = true
	if err := c.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	h.expectReady(h.reconcile("fleet"))
	if get(t, "v1", "ConfigMap", h.ns, "web-config") != nil {
		t.Error("allowEmpty: true did not prune")
	}
}

func TestPruneDisabledAndForeignObjectsAreKept(t *testing.T) {
	h := newHarness(t)
	keep := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  annotations:\n    driftless.dev/prune: disabled\ndata: {k: v}\n"
	h.repo.Commit(t, "initial", map[string]string{
		"keep.yaml":    keep,
		"adopted.yaml": configMap("adopted", "v1"),
		"gone.yaml":    configMap("gone", "v1"),
	})
	h.createSync("fleet", nil)
	h.expectReady(h.reconcile("fleet"))

	// Someone hands "adopted" to another owner before it leaves git.
	adopted := get(t, "v1", "ConfigMap", h.ns, "adopted")
	labels := adopted.GetLabels()
	labels[v1alpha1.SyncLabel] = "other.owner"
	adopted.SetLabels(labels)
	if err := c.Update(context.Background(), adopted); err != nil {
		t.Fatal(err)
	}
	h.repo.Commit(t, "remove all three", map[string]string{"keep.yaml": "", "adopted.yaml": "", "gone.yaml": "", "other.yaml": configMap("other", "v1")})
	s := h.reconcile("fleet")
	h.expectReady(s)
	if get(t, "v1", "ConfigMap", h.ns, "keep") == nil {
		t.Error("object with driftless.dev/prune: disabled was pruned")
	}
	if get(t, "v1", "ConfigMap", h.ns, "adopted") == nil {
		t.Error("object labelled for another Sync was pruned")
	}
	if get(t, "v1", "ConfigMap", h.ns, "gone") != nil {
		t.Error("object removed from git was not pruned")
	}
	if rec := s.Status.History[0]; rec.Pruned != 1 {
		t.Errorf("newest history record = %+v, want 1 pruned", rec)
	}
}

func TestImmutableFieldChangeFailsClearlyOrRecreatesWhenForced(t *testing.T) {
	h := newHarness(t)
	job := func(image, force string) string {
		ann := ""
		if force != "" {
			ann = "  annotations:\n    driftless.dev/force: " + force + "\n"
		}
		return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n" + ann +
			"spec:\n  suspend: true\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: m, image: " + image + "}]\n"
	}
	h.repo.Commit(t, "initial", map[string]string{"job.yaml": job("busybox:1", "")})
	h.createSync("fleet", nil)
	h.expectReady(h.reconcile("fleet"))
	uid := get(t, "batch/v1", "Job", h.ns, "migrate").GetUID()

	h.repo.Commit(t, "new image", map[string]string{"job.yaml": job("busybox:2", "")})
	s := h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonValidationFailed, "job.yaml", "immutable", "driftless.dev/force: enabled")

	// A forced re-creation whose replacement would be refused deletes nothing.
	broken := strings.Replace(job("busybox:2", "enabled"), "restartPolicy: Never", "restartPolicy: Sometimes", 1)
	h.repo.Commit(t, "force an invalid job", map[string]string{"job.yaml": broken})
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonValidationFailed, "job.yaml", "would be refused")
	if got := get(t, "batch/v1", "Job", h.ns, "migrate"); got == nil || got.GetUID() != uid {
		t.Fatal("the Job was deleted although its replacement is invalid")
	}

	h.repo.Commit(t, "force it", map[string]string{"job.yaml": job("busybox:2", "enabled")})
	s = h.reconcile("fleet")
	h.expectReady(s)
	got := get(t, "batch/v1", "Job", h.ns, "migrate")
	if got == nil || got.GetUID() == uid {
		t.Fatal("forced Job was not re-created")
	}
	containers, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers")
	if img := containers[0].(map[string]any)["image"]; img != "busybox:2" {
		t.Errorf("image = %v, want busybox:2", img)
	}
}

func TestIgnoringAFieldLaterKeepsItsLiveValue(t *testing.T) {
	h := newHarness(t)
	four := strings.Replace(deployment(h.ns, "web", "512Mi"), "replicas: 0", "replicas: 4", 1)
	h.repo.Commit(t, "four", map[string]string{"app.yaml": four})
	h.createSync("fleet", nil)
	h.expectReady(h.reconcile("fleet"))

	// An autoscaler takes over replicas...
	live := get(t, "apps/v1", "Deployment", h.ns, "web")
	_ = unstructured.SetNestedField(live.Object, int64(6), "spec", "replicas")
	if err := c.Update(context.Background(), live, client.FieldOwner("horizontal-pod-autoscaler")); err != nil {
		t.Fatal(err)
	}
	// ...and git lets it: replicas is ignored and no longer set.
	ignoring := strings.Replace(strings.Replace(deployment(h.ns, "web", "512Mi"), "  replicas: 0\n", "", 1),
		"  namespace: "+h.ns+"\n", "  namespace: "+h.ns+"\n  annotations:\n    driftless.dev/ignore-fields: /spec/replicas\n", 1)
	h.repo.Commit(t, "let the autoscaler own replicas", map[string]string{"app.yaml": ignoring})
	h.expectReady(h.reconcile("fleet"))
	if r, _, _ := unstructured.NestedInt64(get(t, "apps/v1", "Deployment", h.ns, "web").Object, "spec", "replicas"); r != 6 {
		t.Errorf("spec.replicas = %d after ignoring it, want the autoscaler's 6", r)
	}
}
