package render

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Helm's annotations on the objects of a chart.
const (
	hookAnnotation         = "helm.sh/hook"
	hookWeightAnnotation   = "helm.sh/hook-weight"
	hookDeleteAnnotation   = "helm.sh/hook-delete-policy"
	resourcePolicyAnnotion = "helm.sh/resource-policy"
)

// phase is when an object of a chart is applied, relative to the others.
type phase int

const (
	phaseCRD  phase = iota // crds/, with spec.includeCRDs
	phasePre               // pre-install and pre-upgrade hooks
	phaseMain              // the chart's objects
	phasePost              // post-install and post-upgrade hooks
	phaseSkip              // test, delete and rollback hooks: never applied
)

// chartObject is a decoded object of a chart, before it is added.
type chartObject struct {
	origin Origin
	value  map[string]any
	phase  phase
	weight int
}

// addChartObjects adds the objects the templates of chart c rendered, and
// its CRDs if hc asks for them, each with its wave (see hookWaves). The
// origin of each is file, the HelmChart's file, and the template.
func (r *renderer) addChartObjects(file string, hc *v1alpha1.HelmChart, c *chart.Chart, rendered map[string]string) {
	var objects []chartObject
	if hc.Spec.IncludeCRDs {
		for _, crd := range c.CRDObjects() {
			if !r.decodeRendered(file, crd.Filename, string(crd.File.Data), phaseCRD, &objects) {
				return
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		if path.Base(name) == "NOTES.txt" || strings.TrimSpace(rendered[name]) == "" {
			continue
		}
		if !r.decodeRendered(file, name, rendered[name], phaseMain, &objects) {
			return
		}
	}
	waves := hookWaves(objects)
	namespace := r.releaseNamespace(hc)
	for _, o := range objects {
		if o.phase == phaseSkip {
			continue
		}
		annotate(o, waves)
		if meta, ok := o.value["metadata"].(map[string]any); ok && meta["namespace"] == nil {
			meta["namespace"] = namespace
		}
		r.addValue(o.origin, "object", o.value, nil)
		if r.over {
			return
		}
	}
}

// decodeRendered decodes what template name rendered, counting its
// documents against the budgets, and appends its objects to objects. It
// reports whether the render may go on.
func (r *renderer) decodeRendered(file, name, out string, p phase, objects *[]chartObject) bool {
	o := Origin{Path: file, From: name}
	for _, doc := range splitYAML([]byte(out), r.documentsLeft()) {
		if !r.countDocument(o) {
			return false
		}
		v, _, err := decodeYAML(doc)
		switch {
		case err != nil:
			r.fail(o, "", fmt.Errorf("the template rendered invalid YAML (lines count in its output): %w", err))
			continue
		case v == nil:
			continue
		case !r.countDecoded(o, decodedSize(v)):
			return false
		}
		obj, ok := v.(map[string]any)
		if !ok {
			r.fail(o, "", fmt.Errorf("document %d of the output is %s, not an object", doc.index, describe(v)))
			continue
		}
		co := chartObject{origin: o, value: obj, phase: p}
		if p == phaseMain {
			co.phase, co.weight = hookOf(obj)
		}
		*objects = append(*objects, co)
	}
	return true
}

// hookOf returns the phase of obj from its helm.sh/hook annotation, and
// its helm.sh/hook-weight (0 when not an integer, as Helm reads it).
func hookOf(obj map[string]any) (phase, int) {
	annotations := annotationsOf(obj)
	hooks, ok := annotations[hookAnnotation]
	if !ok {
		return phaseMain, 0
	}
	p := phaseSkip
	for h := range strings.SplitSeq(hooks, ",") {
		switch strings.TrimSpace(h) {
		case "pre-install", "pre-upgrade":
			p = phasePre
		case "post-install", "post-upgrade":
			if p != phasePre {
				p = phasePost
			}
		}
	}
	weight, _ := strconv.Atoi(strings.TrimSpace(annotations[hookWeightAnnotation]))
	return p, weight
}

func annotationsOf(obj map[string]any) map[string]string {
	meta, _ := obj["metadata"].(map[string]any)
	raw, _ := meta["annotations"].(map[string]any)
	annotations := make(map[string]string, len(raw))
	for k, v := range raw {
		if s, ok := v.(string); ok {
			annotations[k] = s
		}
	}
	return annotations
}

// waveKey is a phase and a hook weight.
type waveKey struct {
	phase  phase
	weight int
}

// hookWaves gives each phase and hook weight of objects a wave: the
// chart's objects wave 0; pre-install hooks the waves before it, one per
// weight, the lowest weight first; CRDs the wave before those; and
// post-install hooks the waves after 0, one per weight.
func hookWaves(objects []chartObject) map[waveKey]int {
	var pre, post []int
	hasCRDs := false
	for _, o := range objects {
		switch o.phase {
		case phasePre:
			pre = append(pre, o.weight)
		case phasePost:
			post = append(post, o.weight)
		case phaseCRD:
			hasCRDs = true
		}
	}
	slices.Sort(pre)
	pre = slices.Compact(pre)
	slices.Sort(post)
	post = slices.Compact(post)
	waves := map[waveKey]int{{phase: phaseMain}: 0}
	for i, w := range pre {
		waves[waveKey{phasePre, w}] = i - len(pre)
	}
	for i, w := range post {
		waves[waveKey{phasePost, w}] = i + 1
	}
	if hasCRDs {
		waves[waveKey{phase: phaseCRD}] = -len(pre) - 1
	}
	return waves
}

// annotate sets the wave of a CRD or a hook, unless its template set one;
// lets a hook that Helm would delete before creating it anew (the default
// hook-delete-policy, before-hook-creation) be re-created when a field that
// cannot change, such as a Job's template, changes; and keeps from pruning
// an object Helm keeps (helm.sh/resource-policy: keep).
func annotate(o chartObject, waves map[waveKey]int) {
	meta, ok := o.value["metadata"].(map[string]any)
	if !ok {
		return // addValue reports it
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	setDefault := func(k, v string) {
		if _, ok := annotations[k]; !ok {
			annotations[k] = v
		}
	}
	key := waveKey{phase: o.phase}
	if o.phase == phasePre || o.phase == phasePost {
		key.weight = o.weight
		policy, _ := annotations[hookDeleteAnnotation].(string)
		if policy == "" || strings.Contains(policy, "before-hook-creation") {
			setDefault(v1alpha1.ForceAnnotation, v1alpha1.Enabled)
		}
	}
	if wave := waves[key]; wave != 0 {
		setDefault(v1alpha1.WaveAnnotation, strconv.Itoa(wave))
	}
	if annotations[resourcePolicyAnnotion] == "keep" {
		setDefault(v1alpha1.PruneAnnotation, v1alpha1.Disabled)
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
}
