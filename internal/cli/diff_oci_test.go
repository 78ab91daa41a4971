package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

// diffPushArtifact pushes files to the repository fleet of reg under tag,
// as `driftless push artifact` does, and returns the artifact's digest.
func diffPushArtifact(t *testing.T, reg *testenv.OCIRegistry, tag string, files map[string]string) string {
	t.Helper()
	dir := testenv.WriteFiles(t, files)
	_, digest, err := oci.Push(context.Background(), oci.PushOptions{URL: reg.URL("fleet") + ":" + tag, Dir: dir,
		Source: "https://example.com/fleet.git", Revision: "main@sha1:" + strings.Repeat("ab", 20), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func TestDiffOfAnOCISyncShowsAHandEditAndANewArtifact(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	v1 := diffPushArtifact(t, reg, "1.0.0", map[string]string{"workloads/config.yaml": diffConfigMap("", "web-config", "v1")})
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{OCI: &v1alpha1.OCISource{URL: reg.URL("fleet"), SemVer: ">=1.0.0", Insecure: true}},
			Paths:           []string{"workloads"},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: ns,
		},
	}
	if err := cl.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(s)
	diffSyncOnce(t, cl, key)
	diff := func(args ...string) diffResult {
		return runDiffCommand(t, append([]string{"--sync", key.String(), "--kubeconfig", env.ControlPlane.KubeconfigPath()}, args...)...)
	}
	if r := diff().expect(t, 0); r.out != "0 to create, 0 to change, 0 to prune, 1 unchanged\n" {
		t.Errorf("in sync: %q", r.out)
	}

	var cm corev1.ConfigMap
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["key"] = "edited-by-hand"
	if err := cl.Update(context.Background(), &cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	r := diff().expect(t, 1)
	want := "~ ConfigMap/" + ns + "/web-config (workloads/config.yaml#0)\n--- live\n+++ " + oci.Short("1.0.0@"+v1) + "\n"
	if !strings.Contains(r.out, want) {
		t.Errorf("the hand edit's diff lacks %q:\n%s", want, r.out)
	}
	d := diff("-o", "json").expect(t, 1).json(t)
	if diff := cmp.Diff([]string{"-  key: edited-by-hand", "+  key: v1"}, diffLines(d.diffOf(t, "ConfigMap/"+ns+"/web-config"))); diff != "" {
		t.Errorf("changed lines of the hand-edited ConfigMap (-want +got):\n%s", diff)
	}

	v2 := diffPushArtifact(t, reg, "1.1.0", map[string]string{
		"workloads/config.yaml": diffConfigMap("", "web-config", "v2"),
		"workloads/added.yaml":  diffConfigMap("", "added", "v1"),
	})
	d = diff("-o", "json").expect(t, 1).json(t)
	if d.To != oci.Short("1.1.0@"+v2) {
		t.Errorf("the diff is to %q, want the newest artifact in range, %s", d.To, oci.Short("1.1.0@"+v2))
	}
	wantChanges := []diffChange{
		{"create", "ConfigMap/" + ns + "/added", "workloads/added.yaml#0"},
		{"update", "ConfigMap/" + ns + "/web-config", "workloads/config.yaml#0"},
	}
	if diff := cmp.Diff(wantChanges, d.changes()); diff != "" {
		t.Errorf("changes to the new artifact (-want +got):\n%s", diff)
	}

	t.Run("--revision names a tag or a digest of the repository", func(t *testing.T) {
		for _, rev := range []string{"1.0.0", v1} {
			d := diff("--revision", rev, "-o", "json").expect(t, 1).json(t)
			if diff := cmp.Diff([]diffChange{{"update", "ConfigMap/" + ns + "/web-config", "workloads/config.yaml#0"}}, d.changes()); diff != "" {
				t.Errorf("--revision %s: changes (-want +got):\n%s", rev, diff)
			}
		}
		r := diff("--revision", "9.9.9").expect(t, 2)
		if !strings.Contains(r.errOut, "9.9.9") || !strings.Contains(r.errOut, reg.URL("fleet")) {
			t.Errorf("a missing tag's error names neither the tag nor the repository:\n%s", r.errOut)
		}
	})
}
