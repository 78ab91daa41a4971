package setters

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Flux v1 annotation prefixes; the older flux.weave.works is read too.
var fluxV1Prefixes = []string{"fluxcd.io/", "flux.weave.works/"}

// podSpecPaths are where each workload kind keeps its pod spec.
var podSpecPaths = map[string][]string{
	"Deployment":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
}

func fluxV1Annotation(annotations map[string]string, key string) (string, bool) {
	for _, p := range fluxV1Prefixes {
		if v, ok := annotations[p+key]; ok {
			return v, true
		}
	}
	return "", false
}

// fluxV1 finds the containers of an automated Flux v1 workload and sets
// their image to the tag of the policy its annotations imply. Images
// with a setter marker are left to the marker.
func fluxV1(file string, doc *yaml.Node, marked map[*yaml.Node]bool, lookup Lookup) ([]edit, []v1alpha1.ImageChange, []Problem) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, nil
	}
	obj := yaml.NewRNode(doc.Content[0])
	path, ok := podSpecPaths[obj.GetKind()]
	if !ok {
		return nil, nil, nil
	}
	annotations := obj.GetAnnotations()
	if v, _ := fluxV1Annotation(annotations, "automated"); v != "true" {
		return nil, nil, nil
	}
	if v, _ := fluxV1Annotation(annotations, "locked"); v == "true" {
		return nil, nil, nil
	}
	podSpec, err := obj.Pipe(yaml.Lookup(path...))
	if err != nil || podSpec == nil {
		return nil, nil, nil
	}
	workload := obj.GetKind() + "/" + obj.GetName()
	var (
		edits    []edit
		changes  []v1alpha1.ImageChange
		problems []Problem
	)
	for _, field := range []string{"initContainers", "containers"} {
		list, err := podSpec.Pipe(yaml.Lookup(field))
		if err != nil || list == nil {
			continue
		}
		for _, c := range list.Content() {
			container := yaml.NewRNode(c)
			nameNode, imageNode := container.Field("name"), container.Field("image")
			if nameNode == nil || imageNode == nil || imageNode.Value.YNode().Kind != yaml.ScalarNode {
				continue
			}
			image := imageNode.Value.YNode()
			if marked[image] {
				continue
			}
			name := yaml.GetValue(nameNode.Value)
			pattern, found := fluxV1Annotation(annotations, "tag."+name)
			if !found {
				pattern = "glob:*"
			}
			ref := ParseRef(image.Value)
			implied := Implied{Name: fmt.Sprintf("flux-v1:%s:%s", workload, name)}
			implied.Spec, err = impliedSpec(ref.Name, pattern)
			if err != nil {
				problems = append(problems, Problem{File: file, Line: image.Line,
					Message: fmt.Sprintf("%s: annotation tag.%s %q: %v", workload, name, pattern, err)})
				continue
			}
			latest, err := lookup.Implied(implied)
			if err != nil {
				problems = append(problems, Problem{File: file, Line: image.Line, Message: fmt.Sprintf("%s: %v", implied.Name, err)})
				continue
			}
			value, err := setField(image.Value, FieldImage, latest)
			if err != nil {
				problems = append(problems, Problem{File: file, Line: image.Line, Message: fmt.Sprintf("%s: %v", implied.Name, err)})
				continue
			}
			if value != image.Value {
				edits = append(edits, edit{line: image.Line, column: image.Column, node: image, value: value})
				changes = append(changes, v1alpha1.ImageChange{File: file, Line: image.Line, Image: ref.Name, Old: image.Value, New: value, Policy: implied.Name})
			}
		}
	}
	return edits, changes, problems
}

// impliedSpec turns a Flux v1 tag pattern into a policy for image.
func impliedSpec(image, pattern string) (v1alpha1.ImagePolicySpec, error) {
	spec := v1alpha1.ImagePolicySpec{Image: image}
	kind, arg, ok := strings.Cut(pattern, ":")
	if !ok {
		kind, arg = "glob", pattern
	}
	switch kind {
	case "semver":
		spec.Policy.SemVer = &v1alpha1.SemVerPolicy{Range: arg}
	case "glob":
		spec.Policy.Alphabetical = &v1alpha1.OrderPolicy{}
		spec.FilterTags = &v1alpha1.TagFilter{Pattern: globPattern(arg)}
		spec.Exclude = []string{"^latest$"}
	case "regex", "regexp":
		if _, err := regexp.Compile(arg); err != nil {
			return spec, fmt.Errorf("not a regular expression: %w", err)
		}
		spec.Policy.Alphabetical = &v1alpha1.OrderPolicy{}
		spec.FilterTags = &v1alpha1.TagFilter{Pattern: arg}
	default:
		return spec, fmt.Errorf("unknown kind %q, want one of semver, glob or regex", kind)
	}
	return spec, nil
}

// globPattern turns a Flux v1 glob (* and ?) into an anchored regexp.
func globPattern(glob string) string {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return b.String()
}
