package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
)

// isHelmChart reports whether v, a decoded document, is a HelmChart.
func isHelmChart(v any) bool {
	obj, ok := v.(map[string]any)
	return ok && obj["apiVersion"] == v1alpha1.GroupVersion.String() && obj["kind"] == v1alpha1.HelmChartKind
}

// parseHelmChart parses doc, a HelmChart, strictly: a field the type does
// not have is an error naming it and its line in the file.
func parseHelmChart(doc document) (*v1alpha1.HelmChart, error) {
	var root yaml3.Node
	if err := yaml3.Unmarshal(doc.data, &root); err != nil {
		return nil, yamlError(doc, err)
	}
	if len(root.Content) == 1 {
		if err := knownFields(root.Content[0], reflect.TypeFor[v1alpha1.HelmChart](), "", doc.line-1); err != nil {
			return nil, err
		}
	}
	j, err := yaml.YAMLToJSONStrict(doc.data)
	if err != nil {
		return nil, yamlError(doc, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var hc v1alpha1.HelmChart
	if err := dec.Decode(&hc); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Errorf("%s is %s, not %s", typeErr.Field, typeErr.Value, typeErr.Type)
		}
		return nil, fmt.Errorf("invalid HelmChart: %w", err)
	}
	return &hc, checkHelmChart(&hc)
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// knownFields returns an error for the first key of n, a YAML node of a
// value of type t, that t has no field for. offset is added to line
// numbers, which then count from the start of the file.
func knownFields(n *yaml3.Node, t reflect.Type, path string, offset int) error {
	if n.Kind == yaml3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil // free-form, such as spec.values
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml3.MappingNode:
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			field, ok := fields[key.Value]
			if !ok {
				return fmt.Errorf("line %d: unknown field %q; %s", key.Line+offset, join(path, key.Value), fieldsOf(path, fields))
			}
			if err := knownFields(value, field, join(path, key.Value), offset); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml3.SequenceNode:
		for i, item := range n.Content {
			if err := knownFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), offset); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := knownFields(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), offset); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps the JSON names of the fields of struct t to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	return fields
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fieldsOf(path string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	if path == "" {
		return "a HelmChart has " + strings.Join(names, ", ")
	}
	return path + " has " + strings.Join(names, ", ")
}

// checkHelmChart returns what is wrong with the fields of hc.
func checkHelmChart(hc *v1alpha1.HelmChart) error {
	var errs []error
	if hc.Metadata.Name == "" {
		errs = append(errs, errors.New("metadata.name is empty; it is the release name"))
	}
	c := hc.Spec.Chart
	sources := 0
	for _, set := range []bool{c.Path != "", c.Repository != "" || c.Name != "", c.OCI != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		errs = append(errs, errors.New("spec.chart names no chart; set path (a chart directory of this repository), repository and name, or oci"))
	case sources > 1:
		errs = append(errs, errors.New("spec.chart names more than one chart; set only one of path, repository and name, or oci"))
	case c.Path != "" && (c.Version != "" || c.SecretRef != nil):
		errs = append(errs, errors.New("spec.chart.version and secretRef are for charts from a repository or registry; a chart of this repository (path) has the version of its Chart.yaml"))
	case (c.Repository != "") != (c.Name != ""):
		errs = append(errs, errors.New("spec.chart.repository and spec.chart.name go together: set both"))
	}
	for i, ref := range hc.Spec.ValuesFrom {
		if ref.Kind != "ConfigMap" && ref.Kind != "Secret" {
			errs = append(errs, fmt.Errorf("spec.valuesFrom[%d].kind is %q; set ConfigMap or Secret", i, ref.Kind))
		}
		if ref.Name == "" {
			errs = append(errs, fmt.Errorf("spec.valuesFrom[%d].name is empty", i))
		}
	}
	return errors.Join(errs...)
}
