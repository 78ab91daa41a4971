package render

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Variable is the value of one variable of Options.Variables.
type Variable struct {
	Value string
	// Secret is set for a value read from a Secret: it never appears in
	// an error, and objects that receive it are listed in
	// Object.SecretVariables.
	Secret bool
}

// VariableName is what a variable name must match.
var VariableName = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// substitute replaces ${name} and ${name:=default} in the string values
// of u with the values of vars; $${ is a literal ${. Keys are left alone.
// A string that is exactly one reference takes the type the value would
// have in YAML when it is an integer or true/false (so `replicas:
// ${replicas}` is a number), except where Kubernetes always wants a string
// (see keepString). It returns the names of the Secret-sourced variables
// it used, and an error for the first reference it cannot resolve.
func substitute(u *unstructured.Unstructured, vars map[string]Variable) (secrets []string, err error) {
	s := substitution{vars: vars}
	obj := s.walk(u.Object, nil).(map[string]any)
	if s.err != nil {
		return nil, s.err
	}
	u.Object = obj
	slices.Sort(s.secrets)
	return slices.Compact(s.secrets), nil
}

type substitution struct {
	vars    map[string]Variable
	secrets []string
	err     error
}

func (s *substitution) walk(v any, path []string) any {
	if s.err != nil {
		return v
	}
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			v[k] = s.walk(v[k], append(path, k))
		}
		return v
	case []any:
		for i, item := range v {
			v[i] = s.walk(item, append(path, "["+strconv.Itoa(i)+"]"))
		}
		return v
	case string:
		if !strings.Contains(v, "${") {
			return v
		}
		before := len(s.secrets)
		out, whole, err := s.expand(v)
		if err != nil {
			s.err = fmt.Errorf("%s: %w", fieldPath(path), err)
			return v
		}
		// A Secret's value stays a string: typed, it would escape the
		// masking of strings in diffs and builds.
		if whole && !keepString(path) && len(s.secrets) == before {
			return typed(out)
		}
		return out
	}
	return v
}

// expand substitutes the references in text. whole is true when text is
// exactly one reference.
func (s *substitution) expand(text string) (out string, whole bool, err error) {
	var b strings.Builder
	rest := text
	refs := 0
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		if i > 0 && rest[i-1] == '$' {
			// $${ is an escaped, literal ${.
			b.WriteString(rest[:i-1] + "${")
			rest = rest[i+2:]
			refs = -1
			continue
		}
		b.WriteString(rest[:i])
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return "", false, fmt.Errorf("%q has a ${ without a closing }; write ${name} or ${name:=default}, or $${ for a literal ${", text)
		}
		ref := rest[i+2 : i+end]
		name, def, hasDefault := strings.Cut(ref, ":=")
		if !VariableName.MatchString(name) {
			return "", false, fmt.Errorf("${%s} is not a variable reference driftless understands; write ${name} or ${name:=default} (names match %s), or $${ for a literal ${", ref, VariableName)
		}
		v, ok := s.vars[name]
		switch {
		case ok:
			b.WriteString(v.Value)
			if v.Secret {
				s.secrets = append(s.secrets, name)
			}
		case hasDefault:
			b.WriteString(def)
		default:
			return "", false, &UndefinedVariableError{Name: name}
		}
		if refs >= 0 {
			refs++
		}
		rest = rest[i+end+1:]
	}
	return b.String(), refs == 1 && strings.HasPrefix(text, "${") && strings.HasSuffix(text, "}"), nil
}

// UndefinedVariableError is a reference to a variable that is not defined
// and has no default.
type UndefinedVariableError struct{ Name string }

func (e *UndefinedVariableError) Error() string {
	return fmt.Sprintf("variable %s is not defined; define it in the Sync's spec.substitute or in a ConfigMap or Secret of spec.substituteFrom, give a default with ${%s:=value}, or write $${%s} for a literal ${%s}", e.Name, e.Name, e.Name, e.Name)
}

var wholeInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// typed returns s as an int64 or bool when YAML would read it as one.
func typed(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if wholeInteger.MatchString(s) {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	return s
}

// keepString tells whether the field at path is one Kubernetes always
// types as a string, where a whole reference stays a string whatever its
// value: the data of ConfigMaps and Secrets; anything under a metadata,
// labels, annotations, matchLabels or nodeSelector at any depth (a pod
// template's labels, a selector); env values, args and command of
// containers.
func keepString(path []string) bool {
	if len(path) > 0 && slices.Contains([]string{"data", "stringData", "binaryData"}, path[0]) {
		return true
	}
	for _, p := range path {
		switch p {
		case "metadata", "labels", "annotations", "matchLabels", "nodeSelector", "args", "command":
			return true
		}
	}
	return len(path) > 0 && path[len(path)-1] == "value"
}

// fieldPath reads "spec.template.spec.containers[0].image".
func fieldPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// substitutionDisabled tells whether u is annotated
// driftless.dev/substitute: disabled.
func substitutionDisabled(u *unstructured.Unstructured) bool {
	return u.GetAnnotations()[v1alpha1.SubstituteAnnotation] == v1alpha1.Disabled
}
