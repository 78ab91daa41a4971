package cli

import (
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/redact"
)

// diffAction is what would happen to one object, in the words of the
// JSON view.
type diffAction string

const (
	diffCreate diffAction = "create"
	diffUpdate diffAction = "update"
	diffDelete diffAction = "delete"
)

// objectDiff is one object that would change.
type objectDiff struct {
	Action diffAction `json:"action"`
	// ID reads Kind/namespace/name, or Kind/name when cluster-scoped.
	ID string `json:"id"`
	// Origin is where the object lives in git, "path#document".
	Origin string `json:"origin,omitempty"`
	// Reason explains an unusual change, such as a re-creation.
	Reason string `json:"reason,omitempty"`
	// Diff is a unified diff of the object's YAML, before → after, with
	// server-managed fields left out and Secret values masked.
	Diff string `json:"diff"`
}

// skippedObject is an object driftless would leave alone.
type skippedObject struct {
	ID     string `json:"id"`
	Origin string `json:"origin,omitempty"`
	Reason string `json:"reason"`
}

// diffSummary counts objects by what would happen to them.
type diffSummary struct {
	Create    int `json:"create"`
	Update    int `json:"update"`
	Delete    int `json:"delete"`
	Unchanged int `json:"unchanged"`
	Skipped   int `json:"skipped"`
}

// diffReport is the result of a diff, apart from how it is shown.
type diffReport struct {
	// From and To name the two sides: "live" and a revision, or two
	// revisions.
	From    string          `json:"from"`
	To      string          `json:"to"`
	Changes []objectDiff    `json:"changes"`
	Skipped []skippedObject `json:"skipped,omitempty"`
	Summary diffSummary     `json:"summary"`
	// secrets are the Secret-derived values of the renders
	// (engine.Redactor): they show as "***" in every object, in every
	// form.
	secrets *redact.Set
	// substituted are the objects into which a value from a Secret was
	// substituted: their live strings that differ where the render's
	// hold a masked value show as "***" (maskLikeDesired).
	substituted map[plan.ID]bool
	// decrypted are the objects that hold values decrypted from git
	// (render.Object.Decrypted): every value shows as "***".
	decrypted map[plan.ID]bool
}

func newDiffReport(from, to string) *diffReport {
	return &diffReport{From: from, To: to, Changes: []objectDiff{}}
}

// hasChanges reports whether anything would be created, updated or
// deleted; skipped objects are not changes.
func (r *diffReport) hasChanges() bool { return len(r.Changes) > 0 }

// add records a change of the object id from before to after (either
// may be nil for a create or delete).
func (r *diffReport) add(action diffAction, id plan.ID, origin, reason string, before, after *unstructured.Unstructured) error {
	b, a := forDisplay(before), forDisplay(after)
	if r.decrypted[id] {
		maskDecrypted(b, a)
	}
	maskSecrets(id, b, a)
	if b != nil {
		r.secrets.Value(b)
	}
	if a != nil {
		r.secrets.Value(a)
	}
	if r.substituted[id] && b != nil && a != nil {
		maskLikeDesired(b, a)
	}
	from, to := r.From, r.To
	if before == nil {
		from = "/dev/null"
	}
	if after == nil {
		to = "/dev/null"
	}
	d, err := unifiedDiff(b, a, from, to)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	r.Changes = append(r.Changes, objectDiff{Action: action, ID: id.String(), Origin: withoutRevision(origin), Reason: reason, Diff: d})
	switch action {
	case diffCreate:
		r.Summary.Create++
	case diffUpdate:
		r.Summary.Update++
	case diffDelete:
		r.Summary.Delete++
	}
	return nil
}

func (r *diffReport) skip(id plan.ID, origin, reason string) {
	r.Skipped = append(r.Skipped, skippedObject{ID: id.String(), Origin: withoutRevision(origin), Reason: reason})
	r.Summary.Skipped++
}

// addChangeSet records the changes of a dry-run apply and prune.
func (r *diffReport) addChangeSet(cs apply.ChangeSet) error {
	for _, c := range cs {
		var err error
		switch c.Action {
		case apply.Created:
			err = r.add(diffCreate, c.ID, c.Origin, c.Reason, nil, c.Applied)
		case apply.Configured:
			err = r.add(diffUpdate, c.ID, c.Origin, c.Reason, c.Live, c.Applied)
		case apply.Pruned:
			err = r.add(diffDelete, c.ID, c.Origin, c.Reason, c.Live, nil)
		case apply.Skipped:
			r.skip(c.ID, c.Origin, c.Reason)
		case apply.Unchanged:
			r.Summary.Unchanged++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// serverManaged are the metadata fields the API server maintains; they
// are noise in a diff.
var serverManaged = []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"}

// displayed returns a copy of u as a diff shows it: without
// server-managed metadata, status, and the revision part of the origin
// annotation (which only names the commit that last changed the object).
func forDisplay(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	for _, f := range serverManaged {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	if ann := c.GetAnnotations(); ann != nil {
		if origin, ok := ann[v1alpha1.OriginAnnotation]; ok {
			ann[v1alpha1.OriginAnnotation] = withoutRevision(origin)
			c.SetAnnotations(ann)
		}
	}
	return c.Object
}

// withoutRevision turns an origin "path#doc@rev" into "path#doc".
func withoutRevision(origin string) string {
	path, _, _ := strings.Cut(origin, "@")
	return path
}

// unifiedDiff returns the unified diff of the YAML of before and after,
// labelled from and to; nil objects are empty files.
func unifiedDiff(before, after map[string]any, from, to string) (string, error) {
	a, err := yamlOf(before)
	if err != nil {
		return "", err
	}
	b, err := yamlOf(after)
	if err != nil {
		return "", err
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: splitLines(a), B: splitLines(b), FromFile: from, ToFile: to, Context: 3,
	})
}

func yamlOf(obj map[string]any) (string, error) {
	if obj == nil {
		return "", nil
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

// lines splits s into lines that keep their "\n". Unlike
// difflib.SplitLines it adds no empty last line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}
