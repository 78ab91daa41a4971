package drift

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
)

// FieldChange is one field that differs from git: where it is, the value
// in git, the value found, and who set it.
type FieldChange struct {
	// Path reads like spec.template.spec.containers[app].resources.limits.memory;
	// list items with a name are addressed by it, others by index.
	Path string
	// Git and Found are the values, rendered compactly and bounded
	// (BoundValue); "<absent>" when a side has no value and "***"
	// (masked) for Secret data.
	Git, Found string
	// Manager is the field manager that set the found value
	// (kubectl-edit, kubectl-client-side-apply, helm, …), or "" when the
	// object's managedFields do not say.
	Manager string
	// At is when that manager last wrote the object, if known.
	At time.Time
}

// String reads "spec.replicas: 3 → 1 (changed by kubectl-edit at 12:03:07)",
// from the found value back to git's.
func (c FieldChange) String() string {
	by := ""
	switch {
	case c.Manager != "" && !c.At.IsZero():
		by = fmt.Sprintf(" (changed by %s at %s)", c.Manager, c.At.UTC().Format("15:04:05"))
	case c.Manager != "":
		by = fmt.Sprintf(" (changed by %s)", c.Manager)
	}
	return fmt.Sprintf("%s: %s → %s%s", c.Path, c.Found, c.Git, by)
}

const (
	absent = "<absent>"
	masked = "***"
)

// Attribute lists the fields git sets on an object whose value in the
// cluster (live) differs from what applying git would give (applied: the
// server-side dry-run result, so defaults and canonical forms match), and
// names the manager of each from live's managedFields. Every change is
// bounded (FieldChange.Bound), Secret data masked first. Fields git does
// not set are never reported: another manager (an autoscaler) may own
// them. self is driftless's own field manager, never blamed.
func Attribute(desired, applied, live *unstructured.Unstructured, self string) []FieldChange {
	if live == nil || applied == nil {
		return nil
	}
	secret := desired.GetKind() == "Secret" && desired.GroupVersionKind().Group == ""
	var changes []FieldChange
	walk(desired.Object, applied.Object, live.Object, nil, func(p path, git, found any, gitOK, foundOK bool) {
		if len(p) > 0 && p[0].name == "metadata" && len(p) > 1 && (p[1].name == "managedFields" || p[1].name == "resourceVersion") {
			return
		}
		if len(p) == 3 && p[1].name == "annotations" && p[2].name == v1alpha1.OriginAnnotation {
			return // names the revision that last changed the object: not drift
		}
		c := FieldChange{Path: p.String(), Git: show(git, gitOK), Found: show(found, foundOK)}
		if secret && len(p) > 0 && (p[0].name == "data" || p[0].name == "stringData") {
			c.Git, c.Found = masked, masked
			if !foundOK {
				c.Found = absent
			}
		}
		c.Manager, c.At = owner(live.GetManagedFields(), p, live.Object, self)
		changes = append(changes, c.Bound())
	})
	slices.SortFunc(changes, func(a, b FieldChange) int { return strings.Compare(a.Path, b.Path) })
	return changes
}

// segment is one step of a path: a field name, or a list item by name or
// index.
type segment struct {
	name  string
	item  string // the item's "name" value, for list items that have one
	index int
	list  bool
}

type path []segment

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.list && s.item != "":
			fmt.Fprintf(&b, "[%s]", s.item)
		case s.list:
			fmt.Fprintf(&b, "[%d]", s.index)
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		}
	}
	return b.String()
}

// walk visits every leaf that desired sets, comparing applied and live
// at the same place.
func walk(desired, applied, live any, p path, visit func(p path, git, found any, gitOK, foundOK bool)) {
	switch d := desired.(type) {
	case map[string]any:
		am, _ := applied.(map[string]any)
		lm, _ := live.(map[string]any)
		if lm == nil && len(d) > 0 && applied != nil {
			visit(p, applied, live, true, live != nil)
			return
		}
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if len(p) == 0 && (k == "apiVersion" || k == "kind" || k == "status") {
				continue
			}
			av, aok := am[k]
			lv, lok := lm[k]
			if !aok {
				continue // applying git does not set it (for example an ignored field)
			}
			if !lok {
				visit(append(p, segment{name: k}), av, nil, true, false)
				continue
			}
			walk(d[k], av, lv, append(p, segment{name: k}), visit)
		}
	case []any:
		al, _ := applied.([]any)
		ll, _ := live.([]any)
		if named(d) && named(al) && named(ll) {
			for _, item := range d {
				name := item.(map[string]any)["name"].(string)
				walk(item, byName(al, name), byName(ll, name), append(p, segment{list: true, item: name}), visit)
			}
			return
		}
		if !reflect.DeepEqual(al, ll) {
			visit(p, al, ll, applied != nil, live != nil)
		}
	default:
		if applied != nil && !reflect.DeepEqual(applied, live) {
			visit(p, applied, live, true, live != nil)
		}
	}
}

// named reports whether every item of l is an object with a string name.
func named(l []any) bool {
	for _, item := range l {
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return true
}

func byName(l []any, name string) any {
	for _, item := range l {
		if item.(map[string]any)["name"] == name {
			return item
		}
	}
	return nil
}

func show(v any, ok bool) string {
	if !ok || v == nil {
		return absent
	}
	if s, isString := v.(string); isString {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// owner finds the manager whose managed field set contains p (the newest
// such entry other than self and status writers).
func owner(entries []metav1.ManagedFieldsEntry, p path, live map[string]any, self string) (string, time.Time) {
	var best string
	var at time.Time
	for _, e := range entries {
		if e.Manager == self || e.Subresource == "status" || e.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &set); err != nil {
			continue
		}
		if !owns(set, p, live) {
			continue
		}
		t := time.Time{}
		if e.Time != nil {
			t = e.Time.Time
		}
		if best == "" || t.After(at) {
			best, at = e.Manager, t
		}
	}
	return best, at
}

// owns walks a FieldsV1 set ({"f:spec": {"f:replicas": {}}}, list items as
// "k:{\"name\":\"app\"}" or "i:0") along p.
func owns(set map[string]any, p path, live any) bool {
	cur := set
	obj := live
	for _, s := range p {
		var next any
		switch {
		case s.list && s.item != "":
			for k, v := range cur {
				if strings.HasPrefix(k, "k:") && keyMatches(k[2:], s.item) {
					next = v
				}
			}
			obj = byName(asList(obj), s.item)
		case s.list:
			next = cur[fmt.Sprintf("i:%d", s.index)]
		default:
			next = cur["f:"+s.name]
			if m, ok := obj.(map[string]any); ok {
				obj = m[s.name]
			}
		}
		m, ok := next.(map[string]any)
		if !ok {
			return false
		}
		cur = m
	}
	return true
}

func keyMatches(key, name string) bool {
	var k map[string]any
	if err := json.Unmarshal([]byte(key), &k); err != nil {
		return false
	}
	return k["name"] == name
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
