package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/controller"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/testenv"
)

// diffResult is one run of `driftless diff`.
type diffResult struct {
	code        int
	out, errOut string
}

func runDiffCommand(t *testing.T, args ...string) diffResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(append([]string{"diff"}, args...), &out, &errOut)
	return diffResult{code: code, out: out.String(), errOut: errOut.String()}
}

// expect fails the test unless the command exited with code.
func (r diffResult) expect(t *testing.T, code int) diffResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.errOut)
	}
	return r
}

// jsonDiff is the --output json document, as a program reads it.
type jsonDiff struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Changes []struct {
		Action string `json:"action"`
		ID     string `json:"id"`
		Origin string `json:"origin"`
		Diff   string `json:"diff"`
	} `json:"changes"`
	Summary map[string]int `json:"summary"`
}

func (r diffResult) json(t *testing.T) jsonDiff {
	t.Helper()
	var d jsonDiff
	if err := json.Unmarshal([]byte(r.out), &d); err != nil {
		t.Fatalf("--output json is not JSON: %v\n%s", err, r.out)
	}
	return d
}

// change is what a reviewer checks first: what happens to which object,
// from which file.
type diffChange struct{ Action, ID, Origin string }

func (d jsonDiff) changes() []diffChange {
	out := []diffChange{}
	for _, c := range d.Changes {
		out = append(out, diffChange{c.Action, c.ID, c.Origin})
	}
	return out
}

// diffOf returns the diff of the object id in d.
func (d jsonDiff) diffOf(t *testing.T, id string) string {
	t.Helper()
	for _, c := range d.Changes {
		if c.ID == id {
			return c.Diff
		}
	}
	t.Fatalf("no change of %s in %+v", id, d.changes())
	return ""
}

// diffLines returns the - and + lines of a unified diff, without its
// ---/+++ file header.
func diffLines(diff string) []string {
	var out []string
	for _, l := range strings.Split(diff, "\n") {
		if strings.HasPrefix(l, "---") || strings.HasPrefix(l, "+++") {
			continue
		}
		if strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+") {
			out = append(out, l)
		}
	}
	return out
}

func diffConfigMap(namespace, name, value string) string {
	ns := ""
	if namespace != "" {
		ns = "\n  namespace: " + namespace
	}
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s%s\ndata:\n  key: %s\n", name, ns, value)
}

func diffSecret(name string, data, stringData map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n", name)
	for _, f := range []struct {
		name   string
		values map[string]string
	}{{"data", data}, {"stringData", stringData}} {
		if len(f.values) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s:\n", f.name)
		for _, k := range slices.Sorted(maps.Keys(f.values)) {
			v := f.values[k]
			if f.name == "data" {
				v = base64.StdEncoding.EncodeToString([]byte(v))
			}
			fmt.Fprintf(&b, "  %s: %q\n", k, v)
		}
	}
	return b.String()
}

// expectNoSecretValues fails if any of values, plain or base64-encoded,
// appears in output.
func expectNoSecretValues(t *testing.T, output string, values ...string) {
	t.Helper()
	for _, v := range values {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if strings.Contains(output, form) {
				t.Errorf("output shows the Secret value %q as %q:\n%s", v, form, output)
			}
		}
	}
}

func TestDiffOfCommitsThatRenderTheSameObjectsExitsZero(t *testing.T) {
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	first := repo.Commit(t, "initial", map[string]string{
		"workloads/config.yaml": diffConfigMap("shop", "web", "v1"),
		"workloads/other.yaml":  diffConfigMap("shop", "other", "v1"),
	})
	// Moving on changes every origin annotation's revision, and nothing else.
	repo.Commit(t, "docs", map[string]string{"README.md": "# fleet\n"})

	for name, args := range map[string][]string{
		"an older commit and the branch":  {"--from", first, "--to", "main"},
		"the same branch twice":           {"--from", "main", "--to", "main"},
		"a commit and itself as a branch": {"--from", first, "--to", first},
	} {
		t.Run(name, func(t *testing.T) {
			r := runDiffCommand(t, append([]string{"--repo", repo.FileURL()}, args...)...).expect(t, 0)
			if want := "0 to create, 0 to change, 0 to prune, 2 unchanged\n"; r.out != want {
				t.Errorf("output = %q, want %q", r.out, want)
			}
		})
	}
}

func TestDiffBetweenTwoCommitsShowsTheAddedRemovedAndModifiedObjects(t *testing.T) {
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "initial", map[string]string{
		"workloads/config.yaml": diffConfigMap("shop", "web", "v1"),
		"workloads/old.yaml":    diffConfigMap("shop", "old", "v1"),
		"workloads/same.yaml":   diffConfigMap("shop", "same", "v1"),
		"elsewhere/x.yaml":      diffConfigMap("shop", "not-in-path", "v1"),
	})
	repo.Tag(t, "v1")
	second := repo.Commit(t, "change", map[string]string{
		"workloads/config.yaml": diffConfigMap("shop", "web", "v2"),
		"workloads/old.yaml":    "",
		"workloads/new.yaml":    diffConfigMap("shop", "new", "v1"),
		"elsewhere/x.yaml":      diffConfigMap("shop", "not-in-path", "v2"),
	})
	args := []string{"--repo", repo.FileURL(), "--from", "v1", "--to", "main", "--path", "workloads"}

	d := runDiffCommand(t, append(args, "--output", "json")...).expect(t, 1).json(t)
	want := []diffChange{
		{"create", "ConfigMap/shop/new", "workloads/new.yaml#0"},
		{"update", "ConfigMap/shop/web", "workloads/config.yaml#0"},
		{"delete", "ConfigMap/shop/old", "workloads/old.yaml#0"},
	}
	if diff := cmp.Diff(want, d.changes()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"create": 1, "update": 1, "delete": 1, "unchanged": 1, "skipped": 0}, d.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-  key: v1", "+  key: v2"}, diffLines(d.diffOf(t, "ConfigMap/shop/web"))); diff != "" {
		t.Errorf("changed lines of the modified ConfigMap (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(d.From, "v1 (") || d.To != "main ("+second[:7]+")" {
		t.Errorf("from %q, to %q: want them named by ref and short revision", d.From, d.To)
	}

	r := runDiffCommand(t, args...).expect(t, 1)
	if r.errOut != "" {
		t.Errorf("changes are not an error, yet stderr says:\n%s", r.errOut)
	}
	for _, want := range []string{
		"+ ConfigMap/shop/new (workloads/new.yaml#0)\n--- /dev/null\n+++ main (" + second[:7] + ")\n",
		"+  name: new\n",
		"~ ConfigMap/shop/web (workloads/config.yaml#0)\n--- v1 (",
		"-  key: v1\n+  key: v2\n",
		"- ConfigMap/shop/old (workloads/old.yaml#0)\n",
		"\n1 to create, 1 to change, 1 to prune, 1 unchanged\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("text output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "same") || strings.Contains(r.out, "not-in-path") {
		t.Errorf("text output shows an unchanged object or one outside --path:\n%s", r.out)
	}
}

func TestDiffReadsALocalCloneAtAnyRevisionGitResolves(t *testing.T) {
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	first := repo.Commit(t, "initial", map[string]string{"config.yaml": diffConfigMap("", "web", "v1")})
	repo.Tag(t, "v1")
	repo.Commit(t, "change", map[string]string{"config.yaml": diffConfigMap("", "web", "v2")})
	// A commit on no branch, as in a CI checkout of a pull request.
	git := func(args ...string) string {
		t.Helper()
		out, err := testenv.GitCommand(repo.Work, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("checkout", "--quiet", "--detach")
	if err := os.WriteFile(filepath.Join(repo.Work, "config.yaml"), []byte(diffConfigMap("", "web", "v3")), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "--quiet", "--all", "--message", "pull request")
	pr := git("rev-parse", "HEAD")

	for _, tc := range []struct {
		name, from, to string
		code           int
	}{
		{"a tag and a branch", "v1", "main", 1},
		{"a short SHA and a detached HEAD", first[:8], "HEAD", 1},
		{"a remote-tracking branch and a detached HEAD", "origin/main", "HEAD", 1},
		{"a relative revision and a branch", "HEAD~1", "main", 0},
		{"a full SHA and HEAD", pr, "HEAD", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runDiffCommand(t, "--repo", repo.Work, "--from", tc.from, "--to", tc.to).expect(t, tc.code)
			if tc.code == 1 && !strings.Contains(r.out, "~ ConfigMap/default/web (config.yaml#0)") {
				t.Errorf("output lacks the change of the ConfigMap:\n%s", r.out)
			}
		})
	}
	r := runDiffCommand(t, "--repo", repo.Work, "--from", "no-such-ref", "--to", "HEAD").expect(t, 2)
	if !strings.Contains(r.errOut, `--from "no-such-ref"`) {
		t.Errorf("error does not name the flag and ref: %s", r.errOut)
	}
	// Through a URL, only what the server advertises can be asked for.
	r = runDiffCommand(t, "--repo", repo.FileURL(), "--from", "HEAD~1", "--to", "main").expect(t, 2)
	if !strings.Contains(r.errOut, `--from "HEAD~1" is not a branch or tag`) {
		t.Errorf("error does not say what a ref may be: %s", r.errOut)
	}
}

func TestDiffNeverShowsSecretValues(t *testing.T) {
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "initial", map[string]string{
		"creds.yaml": diffSecret("creds", map[string]string{"user": "admin-Us3r", "token": "old-T0ken"}, map[string]string{"password": "old-Pa55word"}),
		"gone.yaml":  diffSecret("gone", nil, map[string]string{"key": "gone-K3y"}),
	})
	repo.Tag(t, "v1")
	repo.Commit(t, "rotate", map[string]string{
		"creds.yaml": diffSecret("creds", map[string]string{"user": "admin-Us3r", "token": "new-T0ken", "added": "added-Val"}, map[string]string{"password": "new-Pa55word"}),
		"gone.yaml":  "",
		"new.yaml":   diffSecret("fresh", map[string]string{"key": "fresh-K3y"}, nil),
	})
	values := []string{"admin-Us3r", "old-T0ken", "new-T0ken", "added-Val", "old-Pa55word", "new-Pa55word", "gone-K3y", "fresh-K3y"}
	args := []string{"--repo", repo.FileURL(), "--from", "v1", "--to", "main"}

	text := runDiffCommand(t, args...).expect(t, 1)
	expectNoSecretValues(t, text.out+text.errOut, values...)
	d := runDiffCommand(t, append(args, "-o", "json")...).expect(t, 1)
	expectNoSecretValues(t, d.out+d.errOut, values...)

	// Each value shows whether it changes, and only that.
	wantChanged := []string{
		"-  token: '***'",
		"+  added: '*** (changed)'",
		"+  token: '*** (changed)'",
		"-  password: '***'",
		"+  password: '*** (changed)'",
	}
	if diff := cmp.Diff(wantChanged, diffLines(d.json(t).diffOf(t, "Secret/default/creds"))); diff != "" {
		t.Errorf("changed lines of the rotated Secret (-want +got):\n%s", diff)
	}
	if !strings.Contains(text.out, "+  key: '***'\n") || !strings.Contains(text.out, "+ Secret/default/fresh (new.yaml#0)") {
		t.Errorf("a new Secret is not shown with masked values:\n%s", text.out)
	}
	if !strings.Contains(text.out, "- Secret/default/gone (gone.yaml#0)") {
		t.Errorf("a removed Secret is not shown:\n%s", text.out)
	}
}

func TestMaskSecrets(t *testing.T) {
	secret := plan.ID{Kind: "Secret", Namespace: "shop", Name: "creds"}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name                  string
		id                    plan.ID
		before, after         map[string]any
		wantBefore, wantAfter map[string]any
	}{
		{
			name:       "an unchanged value is masked the same on both sides",
			id:         secret,
			before:     map[string]any{"data": map[string]any{"k": b64("same")}},
			after:      map[string]any{"data": map[string]any{"k": b64("same")}},
			wantBefore: map[string]any{"data": map[string]any{"k": maskedValue}},
			wantAfter:  map[string]any{"data": map[string]any{"k": maskedValue}},
		},
		{
			name:       "a changed value is marked changed after",
			id:         secret,
			before:     map[string]any{"data": map[string]any{"k": b64("old")}},
			after:      map[string]any{"data": map[string]any{"k": b64("new")}},
			wantBefore: map[string]any{"data": map[string]any{"k": maskedValue}},
			wantAfter:  map[string]any{"data": map[string]any{"k": maskedChangedValue}},
		},
		{
			name:       "stringData equals the same value encoded in data",
			id:         secret,
			before:     map[string]any{"data": map[string]any{"k": b64("same")}},
			after:      map[string]any{"stringData": map[string]any{"k": "same"}},
			wantBefore: map[string]any{"data": map[string]any{"k": maskedValue}},
			wantAfter:  map[string]any{"stringData": map[string]any{"k": maskedValue}},
		},
		{
			name:       "a new Secret is masked without marks",
			id:         secret,
			after:      map[string]any{"data": map[string]any{"k": b64("v")}, "stringData": map[string]any{"s": "v"}},
			wantAfter:  map[string]any{"data": map[string]any{"k": maskedValue}, "stringData": map[string]any{"s": maskedValue}},
			wantBefore: nil,
		},
		{
			name: "kubectl's copy of the object is masked too",
			id:   secret,
			before: map[string]any{"metadata": map[string]any{"annotations": map[string]any{lastAppliedAnnotation: `{"data":{"k":"b2xk"}}`}},
				"data": map[string]any{"k": b64("old")}},
			after: map[string]any{"metadata": map[string]any{"annotations": map[string]any{lastAppliedAnnotation: `{"data":{"k":"bmV3"}}`}},
				"data": map[string]any{"k": b64("new")}},
			wantBefore: map[string]any{"metadata": map[string]any{"annotations": map[string]any{lastAppliedAnnotation: maskedValue}},
				"data": map[string]any{"k": maskedValue}},
			wantAfter: map[string]any{"metadata": map[string]any{"annotations": map[string]any{lastAppliedAnnotation: maskedChangedValue}},
				"data": map[string]any{"k": maskedChangedValue}},
		},
		{
			name:       "a data that is not a map is masked whole",
			id:         secret,
			before:     map[string]any{"data": "c2VjcmV0"},
			after:      map[string]any{"data": "c2VjcmV0Mg=="},
			wantBefore: map[string]any{"data": maskedValue},
			wantAfter:  map[string]any{"data": maskedChangedValue},
		},
		{
			name:       "other kinds are left alone",
			id:         plan.ID{Kind: "ConfigMap", Namespace: "shop", Name: "web"},
			before:     map[string]any{"data": map[string]any{"k": "old"}},
			after:      map[string]any{"data": map[string]any{"k": "new"}},
			wantBefore: map[string]any{"data": map[string]any{"k": "old"}},
			wantAfter:  map[string]any{"data": map[string]any{"k": "new"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maskSecrets(tc.id, tc.before, tc.after)
			if diff := cmp.Diff(tc.wantBefore, tc.before); diff != "" {
				t.Errorf("before (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAfter, tc.after); diff != "" {
				t.Errorf("after (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiffWithoutAClusterKnowsWhichKindsAreClusterScoped(t *testing.T) {
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "empty", map[string]string{"README.md": "# fleet\n"})
	repo.Commit(t, "objects", map[string]string{
		"rbac.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n  namespace: ignored\nrules: []\n",
		"crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterwidgets.example.com
spec:
  group: example.com
  scope: Cluster
  names: {kind: ClusterWidget, plural: clusterwidgets}
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`,
		"widgets.yaml": "apiVersion: example.com/v1\nkind: ClusterWidget\nmetadata:\n  name: big\n---\napiVersion: other.example.com/v1\nkind: Gadget\nmetadata:\n  name: small\n",
		"ns.yaml":      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
	})
	d := runDiffCommand(t, "--repo", repo.Work, "--from", "HEAD~1", "--to", "main", "--target-namespace", "shop", "-o", "json").expect(t, 1)
	var ids []string
	for _, c := range d.json(t).changes() {
		ids = append(ids, c.ID)
	}
	want := []string{
		"CustomResourceDefinition/clusterwidgets.example.com",
		"Namespace/shop",
		"ClusterRole/reader",
		"ClusterWidget/big",
		"Gadget/shop/small",
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("created objects (-want +got):\n%s", diff)
	}
}

func TestDiffOfManifestsThatDoNotRenderNamesTheFile(t *testing.T) {
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "initial", map[string]string{"workloads/config.yaml": diffConfigMap("shop", "web", "v1")})
	repo.Commit(t, "broken", map[string]string{"workloads/broken.yaml": "kind: [\n"})
	r := runDiffCommand(t, "--repo", repo.Work, "--from", "HEAD~1", "--to", "HEAD").expect(t, 2)
	if !strings.Contains(r.errOut, "Error: --to HEAD (") || !strings.Contains(r.errOut, "workloads/broken.yaml:1") {
		t.Errorf("error does not name the revision and file:\n%s", r.errOut)
	}
	if r.out != "" {
		t.Errorf("an error prints no diff, got:\n%s", r.out)
	}
}

func TestDiffRefusesWrongFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing to diff", nil, "nothing to diff"},
		{"both modes", []string{"--sync", "a/b", "--repo", "."}, "exclude each other"},
		{"an offline diff without --to", []string{"--repo", ".", "--from", "main"}, "needs --from and --to"},
		{"a Sync without namespace", []string{"--sync", "default"}, "NAMESPACE/NAME"},
		{"offline flags against a cluster", []string{"--sync", "a/b", "--from", "main"}, "--from is for offline diffs"},
		{"a revision and a local directory", []string{"--sync", "a/b", "--revision", "main", "--path", "."}, "exclude each other"},
		{"cluster flags offline", []string{"--repo", ".", "--from", "a", "--to", "b", "--revision", "c"}, "for diffs against a cluster"},
		{"an unknown output format", []string{"--repo", ".", "--from", "a", "--to", "b", "-o", "yaml"}, "use text or json"},
		{"an unknown flag", []string{"--sync", "a/b", "--colour"}, "unknown flag"},
		{"a repository that is no repository", []string{"--repo", "no/such/dir", "--from", "a", "--to", "b"}, "neither a directory nor a URL"},
		{"an unreadable kubeconfig", []string{"--sync", "a/b", "--kubeconfig", "/no/such/kubeconfig"}, "load kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runDiffCommand(t, tc.args...).expect(t, 2)
			if !strings.Contains(r.errOut, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.errOut)
			}
		})
	}
}

func TestDiffHelpExplainsBothModesAndTheExitCodes(t *testing.T) {
	r := runDiffCommand(t, "--help").expect(t, 0)
	for _, want := range []string{"driftless diff --sync shop/web", "driftless diff --repo . --from origin/main --to HEAD", "0  no changes", "1  changes", "2  error"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// Against a cluster.

var (
	diffClusterOnce sync.Once
	diffClusterC    client.Client
	diffClusterErr  error
)

// diffClusterClient returns a client of the test control plane that knows
// Syncs and CRDs, once the Sync CRD is installed and Established.
func diffClusterClient(t *testing.T) client.Client {
	t.Helper()
	diffClusterOnce.Do(func() {
		cl, err := client.New(env.Config, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			diffClusterErr = err
			return
		}
		defs, err := crd.SyncCRDs()
		if err != nil {
			diffClusterErr = err
			return
		}
		if diffClusterErr = env.InstallCRDs(context.Background(), defs...); diffClusterErr != nil {
			return
		}
		diffClusterC = cl
	})
	if diffClusterErr != nil {
		t.Fatal(diffClusterErr)
	}
	return diffClusterC
}

// diffNoEvents is an EventRecorder for reconciles whose events no test
// reads.
type diffNoEvents struct{}

func (diffNoEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// diffSyncOnce runs one sync of the Sync key, as the agent would, and fails
// unless it succeeds.
func diffSyncOnce(t *testing.T, cl client.Client, key client.ObjectKey) {
	t.Helper()
	if c := diffReconcile(t, cl, key); c.Status != metav1.ConditionTrue {
		t.Fatalf("sync of %s failed: %s: %s", key, c.Reason, c.Message)
	}
}

func diffCreateSync(t *testing.T, cl client.Client, ns, url string) client.ObjectKey {
	t.Helper()
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: url, Branch: "main"}},
			Paths:           []string{"workloads"},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: ns,
		},
	}
	if err := cl.Create(context.Background(), s); err != nil {
		t.Fatalf("create Sync: %v", err)
	}
	return client.ObjectKeyFromObject(s)
}

func TestDiffAgainstTheClusterShowsExactlyWhatTheNextSyncWouldChange(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	firstFiles := map[string]string{
		"workloads/config.yaml": diffConfigMap("", "web-config", "v1"),
		"workloads/creds.yaml":  diffSecret("creds", nil, map[string]string{"password": "first-Pa55word"}),
		"workloads/old.yaml":    diffConfigMap("", "old", "v1"),
		"elsewhere/x.yaml":      diffConfigMap("", "not-in-path", "v1"),
	}
	first := repo.Commit(t, "initial", firstFiles)
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	diffSyncOnce(t, cl, key)
	kubeconfig := env.ControlPlane.KubeconfigPath()
	diff := func(args ...string) diffResult {
		return runDiffCommand(t, append([]string{"--sync", key.String(), "--kubeconfig", kubeconfig}, args...)...)
	}

	r := diff().expect(t, 0)
	if want := "0 to create, 0 to change, 0 to prune, 3 unchanged\n"; r.out != want || r.errOut != "" {
		t.Errorf("in sync: stdout %q, stderr %q; want %q and nothing", r.out, r.errOut, want)
	}

	second := repo.Commit(t, "change", map[string]string{
		"workloads/config.yaml": diffConfigMap("", "web-config", "v2"),
		"workloads/creds.yaml":  diffSecret("creds", nil, map[string]string{"password": "second-Pa55word"}),
		"workloads/old.yaml":    "",
		"workloads/added.yaml":  diffConfigMap("", "added", "v1"),
	})
	secrets := []string{"first-Pa55word", "second-Pa55word"}

	d := diff("-o", "json").expect(t, 1)
	expectNoSecretValues(t, d.out, secrets...)
	got := d.json(t)
	want := []diffChange{
		{"update", "Secret/" + ns + "/creds", "workloads/creds.yaml#0"},
		{"create", "ConfigMap/" + ns + "/added", "workloads/added.yaml#0"},
		{"update", "ConfigMap/" + ns + "/web-config", "workloads/config.yaml#0"},
		{"delete", "ConfigMap/" + ns + "/old", "workloads/old.yaml#0"},
	}
	if diff := cmp.Diff(want, got.changes()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"create": 1, "update": 2, "delete": 1, "unchanged": 0, "skipped": 0}, got.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	// Only what git changes: no server-managed field, no origin revision.
	if diff := cmp.Diff([]string{"-  key: v1", "+  key: v2"}, diffLines(got.diffOf(t, "ConfigMap/"+ns+"/web-config"))); diff != "" {
		t.Errorf("changed lines of the ConfigMap (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-  password: '***'", "+  password: '*** (changed)'"}, diffLines(got.diffOf(t, "Secret/"+ns+"/creds"))); diff != "" {
		t.Errorf("changed lines of the Secret (-want +got):\n%s", diff)
	}

	r = diff().expect(t, 1)
	expectNoSecretValues(t, r.out, secrets...)
	for _, want := range []string{
		"~ ConfigMap/" + ns + "/web-config (workloads/config.yaml#0)\n--- live\n+++ " + second[:7] + "\n",
		"+ ConfigMap/" + ns + "/added (workloads/added.yaml#0)\n--- /dev/null\n",
		"- ConfigMap/" + ns + "/old (workloads/old.yaml#0)\n",
		"\n1 to create, 2 to change, 1 to prune, 0 unchanged\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("text output lacks %q:\n%s", want, r.out)
		}
	}
	if r.errOut != "" {
		t.Errorf("changes are not an error, yet stderr says:\n%s", r.errOut)
	}

	t.Run("--revision of the applied commit shows nothing", func(t *testing.T) {
		diff("--revision", first).expect(t, 0)
	})
	t.Run("--revision of a branch shows its changes", func(t *testing.T) {
		diff("--revision", "main").expect(t, 1)
	})
	t.Run("--path diffs uncommitted work in a checkout", func(t *testing.T) {
		dir := t.TempDir()
		for name, content := range firstFiles {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		diff("--path", dir).expect(t, 0)
		if err := os.WriteFile(filepath.Join(dir, "workloads", "config.yaml"), []byte(diffConfigMap("", "web-config", "v3")), 0o600); err != nil {
			t.Fatal(err)
		}
		d := diff("--path", dir, "-o", "json").expect(t, 1).json(t)
		if diff := cmp.Diff([]diffChange{{"update", "ConfigMap/" + ns + "/web-config", "workloads/config.yaml#0"}}, d.changes()); diff != "" {
			t.Errorf("changes (-want +got):\n%s", diff)
		}
	})
	t.Run("prune: false prunes nothing", func(t *testing.T) {
		var s v1alpha1.Sync
		if err := cl.Get(context.Background(), key, &s); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(s.DeepCopy())
		off := false
		s.Spec.Prune = &off
		if err := cl.Patch(context.Background(), &s, patch); err != nil {
			t.Fatal(err)
		}
		d := diff("-o", "json").expect(t, 1).json(t)
		for _, c := range d.changes() {
			if c.Action == "delete" {
				t.Errorf("with prune: false the diff deletes %s", c.ID)
			}
		}
	})

	diffSyncOnce(t, cl, key)
	r = diff().expect(t, 0)
	if want := "0 to create, 0 to change, 0 to prune, 3 unchanged\n"; r.out != want {
		t.Errorf("after the sync: output %q, want %q", r.out, want)
	}
}

func TestDiffAgainstTheClusterOfANewSyncShowsCreatesAndRefusesInvalidObjects(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "initial", map[string]string{"workloads/config.yaml": diffConfigMap("", "web-config", "v1")})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	kubeconfig := env.ControlPlane.KubeconfigPath()

	r := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig).expect(t, 1)
	for _, want := range []string{"+ ConfigMap/" + ns + "/web-config (workloads/config.yaml#0)\n", "+  key: v1\n", "1 to create, 0 to change, 0 to prune, 0 unchanged\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "uid:") || strings.Contains(r.out, "creationTimestamp") {
		t.Errorf("output shows server-managed fields:\n%s", r.out)
	}
	if diffObjectExists(cl, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, ns, "web-config") {
		t.Errorf("diff created the ConfigMap")
	}

	repo.Commit(t, "invalid", map[string]string{
		"workloads/broken.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: broken\nspec:\n  template: {}\n",
	})
	r = runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig).expect(t, 2)
	for _, want := range []string{"Deployment/" + ns + "/broken", "workloads/broken.yaml#0"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("error lacks %q:\n%s", want, r.errOut)
		}
	}

	r = runDiffCommand(t, "--sync", ns+"/no-such-sync", "--kubeconfig", kubeconfig).expect(t, 2)
	if !strings.Contains(r.errOut, "no Sync "+ns+"/no-such-sync") {
		t.Errorf("error does not say the Sync is missing:\n%s", r.errOut)
	}
}

// diffObjectExists reports whether the object exists.
func diffObjectExists(cl client.Client, gvk schema.GroupVersionKind, ns, name string) bool {
	var obj metav1.PartialObjectMetadata
	obj.SetGroupVersionKind(gvk)
	return cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &obj) == nil
}

func TestDiffOfAnUnreachableClusterIsAnError(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: me, user: {token: x}}]
contexts: [{name: gone, context: {cluster: gone, user: me}}]
current-context: gone
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	r := runDiffCommand(t, "--sync", "shop/web", "--kubeconfig", kubeconfig, "--timeout", "20s").expect(t, 2)
	if !strings.Contains(r.errOut, "127.0.0.1:1") {
		t.Errorf("error does not name the server:\n%s", r.errOut)
	}
}

// TestDiffAndTheAgentMakeTheSamePlan feeds `driftless diff --sync` and the
// agent the same repository and compares what each would do, object by
// object, and how each refuses a commit with a bad wave annotation.
func TestDiffAndTheAgentMakeTheSamePlan(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	waved := func(name, value, wave string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  annotations:\n    driftless.dev/wave: %q\ndata:\n  key: %q\n", name, wave, value)
	}
	repo.Commit(t, "initial", map[string]string{
		"workloads/a.yaml":    diffConfigMap("", "a", "v1"),
		"workloads/b.yaml":    waved("b", "v1", "1"),
		"workloads/gone.yaml": waved("gone", "v1", "2"),
	})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	diffSyncOnce(t, cl, key)

	repo.Commit(t, "change, add, remove", map[string]string{
		"workloads/a.yaml":    diffConfigMap("", "a", "v2"),
		"workloads/c.yaml":    waved("c", "v1", "3"),
		"workloads/gone.yaml": "",
	})
	kubeconfig := env.ControlPlane.KubeconfigPath()
	d := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig, "--output", "json").expect(t, 1).json(t)
	verbs := map[string]string{"create": "create", "update": "update", "delete": "prune"}
	var fromDiff []string
	for _, c := range d.Changes {
		fromDiff = append(fromDiff, verbs[c.Action]+" "+c.ID)
	}

	// The agent, in DryRun mode, says what it would do in its Ready message.
	var s v1alpha1.Sync
	if err := cl.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Mode = v1alpha1.ModeDryRun
	if err := cl.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	msg := diffReconcileMessage(t, cl, key)
	_, would, ok := strings.Cut(msg, ": would ")
	if !ok {
		t.Fatalf("the agent's dry run says %q, want what it would do", msg)
	}
	fromAgent := strings.Split(would, ", ")
	slices.Sort(fromDiff)
	slices.Sort(fromAgent)
	if d := cmp.Diff(fromAgent, fromDiff); d != "" {
		t.Errorf("diff and agent disagree (-agent +diff):\n%s", d)
	}
	if want := []string{"create ConfigMap/" + ns + "/c", "prune ConfigMap/" + ns + "/gone", "update ConfigMap/" + ns + "/a"}; !slices.Equal(fromDiff, want) {
		t.Errorf("diff = %q, want %q", fromDiff, want)
	}

	// A bad wave: both refuse it the same way, naming the file.
	repo.Commit(t, "bad wave", map[string]string{"workloads/c.yaml": waved("c", "v1", "first")})
	r := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig).expect(t, 2)
	agent := diffReconcileMessage(t, cl, key)
	for _, want := range []string{`"first" is not an integer`, "workloads/c.yaml"} {
		if !strings.Contains(r.errOut, want) || !strings.Contains(agent, want) {
			t.Errorf("diff error and agent message must both say %q:\ndiff:  %s\nagent: %s", want, r.errOut, agent)
		}
	}
}

// diffReconcileMessage runs one sync of key as the agent would and returns
// its Ready message.
func diffReconcileMessage(t *testing.T, cl client.Client, key client.ObjectKey) string {
	t.Helper()
	return diffReconcile(t, cl, key).Message
}

// diffReconcile runs one sync of key as the agent would and returns its
// Ready condition.
func diffReconcile(t *testing.T, cl client.Client, key client.ObjectKey) metav1.Condition {
	t.Helper()
	r := &controller.SyncReconciler{
		Client: cl, Reader: cl, Applier: cl,
		RenderOptions: engine.RenderOptions{Scope: engine.MapperScope{Mapper: cl.RESTMapper()}},
		Store:         controller.NewStore(),
		Recorder:      diffNoEvents{},
		CacheDir:      t.TempDir(),
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile %s: %v", key, err)
	}
	var s v1alpha1.Sync
	if err := cl.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	t.Fatalf("Sync %s has no Ready condition after a sync", key)
	return metav1.Condition{}
}
