package setters

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MarkerKey is the key of a Flux v2 setter comment.
const MarkerKey = "$imagepolicy"

// Field is the part of the image a marker sets.
type Field string

// Fields of a marker; FieldImage, the default, is the whole reference.
const (
	FieldImage  Field = ""
	FieldTag    Field = "tag"
	FieldName   Field = "name"
	FieldDigest Field = "digest"
)

// Marker is one parsed setter comment.
type Marker struct {
	Namespace string
	Name      string
	Field     Field
}

// Policy is "namespace/name" of the marker's policy.
func (m Marker) Policy() string { return m.Namespace + "/" + m.Name }

// ParseMarker parses a YAML line comment (with or without its leading
// "#"). It returns ok=false when the comment is no marker at all, and an
// error when it mentions $imagepolicy but is not a valid marker.
func ParseMarker(comment string) (m Marker, ok bool, err error) {
	if !strings.Contains(comment, MarkerKey) {
		return Marker{}, false, nil
	}
	text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(comment), "#"))
	var obj map[string]any
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		return Marker{}, true, fmt.Errorf(`marker %q is not a JSON object like {"$imagepolicy": "namespace:name"}`, clip(text))
	}
	raw, found := obj[MarkerKey]
	if !found || len(obj) != 1 {
		return Marker{}, true, fmt.Errorf(`marker %q must have the one key "$imagepolicy"`, clip(text))
	}
	value, isString := raw.(string)
	if !isString {
		return Marker{}, true, fmt.Errorf(`marker %q: the value of "$imagepolicy" must be a string "namespace:name[:tag|:name|:digest]"`, clip(text))
	}
	parts := strings.Split(value, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Marker{}, true, fmt.Errorf(`marker %q: want "namespace:name" with an optional ":tag", ":name" or ":digest"`, clip(text))
	}
	m = Marker{Namespace: parts[0], Name: parts[1]}
	for _, p := range []struct{ what, v string }{{"namespace", m.Namespace}, {"name", m.Name}} {
		if errs := validation.IsDNS1123Subdomain(p.v); len(errs) > 0 {
			return Marker{}, true, fmt.Errorf("marker %q: policy %s %q is invalid: %s", clip(text), p.what, clip(p.v), strings.Join(errs, "; "))
		}
	}
	if len(parts) == 3 {
		switch f := Field(parts[2]); f {
		case FieldTag, FieldName, FieldDigest:
			m.Field = f
		default:
			return Marker{}, true, fmt.Errorf("marker %q: unknown field %q, want tag, name or digest", clip(text), clip(parts[2]))
		}
	}
	return m, true, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// Ref is an image reference split into its parts.
type Ref struct {
	Name   string // registry/repository
	Tag    string
	Digest string
}

// ParseRef splits "registry:port/repo:tag@sha256:…".
func ParseRef(s string) Ref {
	var r Ref
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s, r.Digest = s[:i], s[i+1:]
	}
	if i := strings.LastIndexByte(s, ':'); i > strings.LastIndexByte(s, '/') {
		s, r.Tag = s[:i], s[i+1:]
	}
	r.Name = s
	return r
}

// ErrNoPolicy is what a Lookup returns, wrapped, for a policy that does
// not exist.
var ErrNoPolicy = errors.New("no such ImagePolicy")

// ErrNotScanned is what a Lookup returns, wrapped, for a policy that has
// not scanned its registry yet: a wait (the update runs again when it
// has), not a failure.
var ErrNotScanned = errors.New("it has not scanned yet")
