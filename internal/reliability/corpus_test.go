package reliability

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/testenv"
)

// corpusCase is one directory of testdata/corpus: a commit made of the
// good tree in testdata/corpus/_base, the case's files/ laid over it,
// and the case.yaml directives.
type corpusCase struct {
	Name string `json:"-"`
	// Outcome is refused (Ready=False, nothing written) or accepted
	// (applied like any good commit).
	Outcome string `json:"outcome"`
	// Reason is the Ready reason of a refused case.
	Reason string `json:"reason"`
	// Message lists substrings of the Ready message: the location (file,
	// line or document, object) and what is wrong.
	Message []string `json:"message"`
	// Never lists substrings the message must not hold: Secret values.
	Never []string `json:"never"`
	// Delete lists files of the base that the commit deletes.
	Delete []string `json:"delete"`
	// Generate writes files too large or too repetitive to keep.
	Generate []generated `json:"generate"`
	// CRLF turns the case's line endings into CRLF; BOM starts each of
	// its files with a UTF-8 byte order mark.
	CRLF bool `json:"crlf"`
	BOM  bool `json:"bom"`
	// Objects lists, for an accepted case, ConfigMaps ("ConfigMap/name")
	// the commit must have created.
	Objects []string `json:"objects"`
	// Encrypt encrypts files of the case with SOPS before they are
	// committed.
	Encrypt []encryptedFile `json:"encrypt"`
	// WithoutDecryption runs the case with the Sync's spec.decryption
	// removed.
	WithoutDecryption bool `json:"withoutDecryption"`

	files map[string]string
}

// generated is a file of Header followed by Repeat Times times, a %d in
// Repeat numbering the repetitions; with Files > 0, Path and Header hold
// a %d and that many such files are written.
type generated struct {
	Path   string `json:"path"`
	Header string `json:"header"`
	Repeat string `json:"repeat"`
	Times  int    `json:"times"`
	Files  int    `json:"files"`
}

// encryptedFile is a file of a case that the runner encrypts with
// internal/secrets (data and stringData only) for the Sync's key, or for
// another key with For "other"; Tamper replaces Tamper[0] with Tamper[1]
// in the encrypted file.
type encryptedFile struct {
	Path   string   `json:"path"`
	For    string   `json:"for"`
	Tamper []string `json:"tamper"`
}

const corpusDir = "testdata/corpus"

// chartRepoURL in a case's file stands for the address of the loopback
// chart repository that serves testdata/corpus/_charts.
const chartRepoURL = "@CHART_REPO@"

// readTree returns the files under dir, by slash path relative to it.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	dirs, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), "_") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(corpusDir, d.Name(), "case.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		cc := corpusCase{Name: d.Name()}
		if err := yaml.UnmarshalStrict(data, &cc); err != nil {
			t.Fatalf("%s/case.yaml: %v", d.Name(), err)
		}
		if cc.Outcome != "refused" && cc.Outcome != "accepted" {
			t.Fatalf("%s/case.yaml: outcome %q: use refused or accepted", d.Name(), cc.Outcome)
		}
		cc.files = readTree(t, filepath.Join(corpusDir, d.Name(), "files"))
		for path, content := range cc.files {
			if cc.CRLF {
				content = strings.ReplaceAll(content, "\n", "\r\n")
			}
			if cc.BOM {
				content = "\ufeff" + content
			}
			cc.files[path] = content
		}
		for _, g := range cc.Generate {
			var body strings.Builder
			for i := range g.Times {
				body.WriteString(strings.ReplaceAll(g.Repeat, "%d", fmt.Sprint(i)))
			}
			if g.Files == 0 {
				cc.files[g.Path] = g.Header + body.String()
			}
			for i := range g.Files {
				n := fmt.Sprint(i)
				cc.files[strings.ReplaceAll(g.Path, "%d", n)] = strings.ReplaceAll(g.Header, "%d", n) + body.String()
			}
		}
		cases = append(cases, cc)
	}
	return cases
}

// corpusRun commits cases over one repository that one Sync and one
// agent follow.
type corpusRun struct {
	t    *testing.T
	ns   string
	repo *testenv.Repo
	key  client.ObjectKey
	base map[string]string
	// written are the paths of the last commit outside the base, which
	// the next commit deletes.
	written []string
}

// commit makes the tree base + files − deleted the new HEAD.
func (r *corpusRun) commit(t *testing.T, message string, files map[string]string, deleted []string) string {
	t.Helper()
	tree := map[string]string{}
	for _, p := range r.written {
		tree[p] = ""
	}
	for p, content := range r.base {
		tree[p] = content
	}
	r.written = r.written[:0]
	for p, content := range files {
		tree[p] = content
		if _, ok := r.base[p]; !ok {
			r.written = append(r.written, p)
		}
	}
	for _, p := range deleted {
		for k := range tree {
			if k == p || strings.HasPrefix(k, p+"/") {
				tree[k] = ""
			}
		}
	}
	return r.repo.Commit(t, message, tree)
}

// state is what the Sync manages in its namespace: every labelled
// ConfigMap and Deployment, by kind/name, with its resourceVersion.
func (r *corpusRun) state(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	sel := client.MatchingLabels{v1alpha1.SyncLabel: r.key.Namespace + "." + r.key.Name}
	out := map[string]string{}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(r.ns), sel); err != nil {
		t.Fatal(err)
	}
	for _, o := range cms.Items {
		out["ConfigMap/"+o.Name] = o.ResourceVersion
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(r.ns), sel); err != nil {
		t.Fatal(err)
	}
	for _, o := range deps.Items {
		out["Deployment/"+o.Name] = o.ResourceVersion
	}
	return out
}

// corpusResult is one case's line in the summary.
type corpusResult struct {
	name, outcome, reason string
	forbidden             int
	took                  time.Duration
}

// Every bad commit of the corpus is refused with its reason and location,
// and writes no object: the audit log shows the agent wrote only Events
// and the Sync's status, and the cluster keeps the last good revision.
// Valid commits with CRLF line endings or byte order marks are applied.
func TestCorpusOfBadCommitsIsRefusedWithoutWrites(t *testing.T) {
	started := time.Now()
	cases := loadCorpus(t)
	if len(cases) < 50 {
		t.Errorf("the corpus has %d cases, want at least 50", len(cases))
	}
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	r := &corpusRun{t: t, ns: ns, repo: srv.NewRepo(t, "corpus"), base: readTree(t, filepath.Join(corpusDir, "_base"))}
	good := r.commit(t, "the last good revision", nil, nil)
	in := newCorpusInputs(t, ns)
	decryption := &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: keySecretName}}
	r.key = newSync(t, ns, "corpus", r.repo.FileURL(), func(s *v1alpha1.Sync) {
		s.Spec.Substitute = map[string]string{"cluster": "test"}
		s.Spec.Decryption = decryption
	})
	startInProcessAgent(t, ns, func(o *agent.Options) {
		// Small budgets, so that the over-budget cases stay small.
		o.RenderBudgets.MaxFiles = 60
		o.RenderBudgets.MaxDocuments = 300
		o.RenderBudgets.MaxObjects = 100
		o.RenderBudgets.MaxBytes = 1048576
	})
	testenv.Eventually(t, 2*time.Minute, "the last good revision is applied", appliedAt(r.key, good))
	goodState := r.state(t)
	if len(goodState) == 0 {
		t.Fatal("the good revision left no labelled object")
	}

	var results []corpusResult
	for _, cc := range cases {
		ok := t.Run(cc.Name, func(t *testing.T) {
			start := time.Now()
			res := corpusResult{name: cc.Name, outcome: cc.Outcome}
			defer func() { res.took = time.Since(start); results = append(results, res) }()
			if cc.WithoutDecryption {
				setDecryption(t, r.key, nil)
				defer func() {
					// With the key back, the case's commit would decrypt
					// and apply: go back to the good revision first.
					good = r.commit(t, "back to good after "+cc.Name, nil, nil)
					testenv.Eventually(t, time.Minute, "the good revision is applied again", appliedAt(r.key, good))
					setDecryption(t, r.key, decryption)
					goodState = r.state(t)
				}()
			}
			from := mark(t)
			rev := r.commit(t, "case "+cc.Name, in.files(t, cc), cc.Delete)
			if cc.Outcome == "accepted" {
				testenv.Eventually(t, time.Minute, "case "+cc.Name+" is applied", appliedAt(r.key, rev))
				now := r.state(t)
				for _, o := range cc.Objects {
					if _, ok := now[o]; !ok {
						t.Errorf("%s was not applied; the Sync manages %v", o, slices.Sorted(maps.Keys(now)))
					}
				}
				// Back to the last good revision for the next case.
				good = r.commit(t, "back to good after "+cc.Name, nil, nil)
				testenv.Eventually(t, time.Minute, "the good revision is applied again", appliedAt(r.key, good))
				goodState = r.state(t)
				return
			}
			ready := failedAt(t, r.key, rev, time.Minute)
			res.reason = ready.Reason
			to := mark(t)
			if os.Getenv("RELIABILITY_CORPUS_PRINT") != "" {
				t.Logf("reason %s, message:\n%s", ready.Reason, ready.Message)
			}
			if ready.Reason != cc.Reason {
				t.Errorf("Ready reason = %s, want %s; message: %s", ready.Reason, cc.Reason, ready.Message)
			}
			for _, want := range cc.Message {
				if !strings.Contains(ready.Message, want) {
					t.Errorf("Ready message lacks %q:\n%s", want, ready.Message)
				}
			}
			for _, secret := range cc.Never {
				if strings.Contains(ready.Message, secret) {
					t.Errorf("Ready message gives away %q:\n%s", secret, ready.Message)
				}
			}
			if bad := forbiddenWrites(t, from, to); len(bad) > 0 {
				res.forbidden = len(bad)
				t.Errorf("the agent wrote %d objects for a refused commit:\n%s", len(bad), strings.Join(bad, "\n"))
			}
			if diff := cmp.Diff(goodState, r.state(t)); diff != "" {
				t.Errorf("the cluster no longer holds the last good revision (-want +got):\n%s", diff)
			}
		})
		if !ok && os.Getenv("RELIABILITY_CORPUS_PRINT") == "" {
			// A case that left the cluster in an unknown state would fail
			// every later one for the wrong reason.
			good = r.commit(t, "back to good after "+cc.Name, nil, nil)
			testenv.Eventually(t, time.Minute, "the good revision is applied again", appliedAt(r.key, good))
			goodState = r.state(t)
		}
	}
	refused, accepted, forbidden := 0, 0, 0
	for _, res := range results {
		if res.outcome == "refused" {
			refused++
		} else {
			accepted++
		}
		forbidden += res.forbidden
	}
	t.Logf("corpus: %d cases, %d refused, %d accepted, objects written by refused commits: %d, in %s",
		len(results), refused, accepted, forbidden, time.Since(started).Round(time.Second))
}

// setDecryption sets the Sync's spec.decryption, as its owner would.
func setDecryption(t *testing.T, key client.ObjectKey, d *v1alpha1.Decryption) {
	t.Helper()
	s, err := getSync(key)
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Decryption = d
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatalf("set spec.decryption of Sync %s: %v", key, err)
	}
}
