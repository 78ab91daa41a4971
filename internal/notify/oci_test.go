package notify

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

const ociDigest = "sha256:5b1f0c9a3e7d2b4f6a8c0e1d3f5a7b9c1e3d5f7a9b1c3e5d7f9a1b3c5d7e9f0a"

// ociSync is syncObj following an OCI artifact, last attempted at tag
// 1.2.0.
func ociSync() *v1alpha1.Sync {
	s := syncObj()
	s.Spec.Source = v1alpha1.Source{OCI: &v1alpha1.OCISource{URL: "oci://ghcr.io/org/fleet-manifests", SemVer: ">=1.0.0"}}
	s.Status.LastAttemptedRevision = "1.2.0@" + ociDigest
	return s
}

func TestMessagesOfAnOCISyncNameItsArtifact(t *testing.T) {
	e, r := messageEndpoints(t)
	r.Eventf(ociSync(), nil, corev1.EventTypeWarning, v1alpha1.ReasonBuildFailed, "Sync", "%s", "app/web.yaml: yaml: line 3")
	want := "artifact oci://ghcr.io/org/fleet-manifests:1.2.0@" + ociDigest

	var g GenericBody
	if err := json.Unmarshal(e[TypeGeneric].waitFor(t, 1)[0].body, &g); err != nil {
		t.Fatal(err)
	}
	if "artifact "+g.Artifact != want || g.CommitURL != "" {
		t.Errorf("generic body names artifact %q and commit page %q, want %q and none", g.Artifact, g.CommitURL, want)
	}
	for _, typ := range []string{TypeSlack, TypeTeams} {
		if body := string(e[typ].waitFor(t, 1)[0].body); !strings.Contains(body, want) {
			t.Errorf("%s body %s does not say %q", typ, body, want)
		}
	}
}

func TestAnOCISyncSendsNoCommitStatusEvenToAnAnnotatedRepository(t *testing.T) {
	e := newEndpoint(t)
	_, d := start(t, statusTarget(t, TypeGitHubStatus, e.URL), Options{})
	s := ociSync()
	s.Annotations = map[string]string{v1alpha1.CommitStatusRepositoryAnnotation: "org/fleet"}
	d.Synced(s, s.Status.LastAttemptedRevision, "", "", false)
	g := syncAt("https://git.example.com/org/fleet")
	g.Name = "from-git"
	g.Annotations = s.Annotations
	d.Synced(g, sha, "", "", false)
	// Notices are handled in order: had the first been sent, it would
	// have arrived first.
	if got := e.waitFor(t, 1); got[0].path != "/repos/org/fleet/statuses/"+sha {
		t.Errorf("first status posted to %s, want the git Sync's commit %s: an artifact's revision is no commit", got[0].path, sha)
	}
}
