package render

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	chartdeps "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/ignore"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
)

// releaseService is .Release.Service in the templates of a chart.
const releaseService = "driftless"

// addHelmChart renders the HelmChart in doc, a document of a manifest
// file at o, and adds the objects of its chart in its place. On any error
// it adds none of them.
func (r *renderer) addHelmChart(o Origin, doc document) {
	r.readsBeyondPaths()
	hc, err := parseHelmChart(doc)
	if err != nil {
		r.fail(o, "HelmChart", err)
		return
	}
	object := "HelmChart/" + hc.Metadata.Name
	r.lookedUpSecret = false
	chrt, err := r.loadChart(o.Path, hc)
	if err == nil {
		var rendered map[string]string
		if rendered, err = r.renderChart(o.Path, hc, chrt); err == nil {
			from := len(r.pending)
			r.addChartObjects(o.Path, hc, chrt, rendered)
			if r.secretValues(hc) || r.lookedUpSecret {
				// Any template may put a value anywhere: every object
				// of the chart is masked like decrypted data.
				r.markDecrypted(from)
			}
			return
		}
	}
	if errors.Is(err, ErrOverBudget) {
		r.stop(o, object, err)
		return
	}
	r.fail(o, object, err)
}

// loadChart loads the chart hc names: a directory of the repository, read
// through the render's root and counted against its budgets, or a chart
// from a repository or registry, which r.opts.Charts fetches.
func (r *renderer) loadChart(file string, hc *v1alpha1.HelmChart) (c *chart.Chart, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("helm could not load the chart: %v", p)
		}
	}()
	dir := ""
	if hc.Spec.Chart.Path == "" {
		if c, err = r.fetchChart(file, hc); err != nil {
			return nil, err
		}
	} else {
		files, err := r.chartFiles("spec.chart.path", hc.Spec.Chart.Path)
		if err != nil {
			return nil, err
		}
		if c, err = chartloader.LoadFiles(files); err != nil {
			return nil, fmt.Errorf("chart %s cannot be loaded: %w", hc.Spec.Chart.Path, err)
		}
		dir = filepath.ToSlash(filepath.Clean(hc.Spec.Chart.Path))
	}
	if err := r.addDependencies(file, hc, c, dir); err != nil {
		return nil, err
	}
	return c, nil
}

// fetchChart loads a chart from a repository or registry.
func (r *renderer) fetchChart(file string, hc *v1alpha1.HelmChart) (*chart.Chart, error) {
	ref := cmp.Or(hc.Spec.Chart.OCI, hc.Spec.Chart.Repository+" "+hc.Spec.Chart.Name)
	if r.opts.Charts == nil {
		return nil, fmt.Errorf("chart %s: charts from repositories need the agent's chart fetcher; driftless build and diff without --sync render only charts of the repository (spec.chart.path)", ref)
	}
	fetched, err := r.opts.Charts.FetchChart(ChartRequest{Chart: hc.Spec.Chart, HelmChart: file})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w: %w", ref, ErrFetchFailed, err)
	}
	return r.loadFetched("chart "+ref, fetched)
}

// loadFetched reads and loads the archive a ChartFetcher fetched,
// counting it against the render's budgets. what names the chart in
// errors.
func (r *renderer) loadFetched(what string, fetched FetchedChart) (*chart.Chart, error) {
	f, err := os.Open(fetched.Path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %w", what, fetched.Version, ErrFetchFailed, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, min(maxFileSize, r.bytesLeft())+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s %s: %w: %w", what, fetched.Version, ErrFetchFailed, err)
	case int64(len(data)) > maxFileSize:
		return nil, fmt.Errorf("%s %s: archive %w", what, fetched.Version, errTooLarge)
	case int64(len(data)) > r.bytesLeft():
		return nil, r.filesOverBudget(int64(len(data)))
	}
	r.used.bytes += int64(len(data))
	if err := r.countRead(fetched.Path); err != nil {
		return nil, err
	}
	c, err := chartloader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s %s (%s) cannot be loaded: %w", what, fetched.Version, fetched.Digest, err)
	}
	return c, nil
}

// chartFiles reads the files of the chart directory dir of the
// repository, leaving out those its .helmignore names.
func (r *renderer) chartFiles(field, dir string) ([]*archive.BufferedFile, error) {
	clean := filepath.Clean(dir)
	if filepath.IsAbs(dir) || !filepath.IsLocal(clean) {
		return nil, fmt.Errorf("%s %q is outside the repository; it is relative to the repository root and cannot leave it", field, dir)
	}
	dir = filepath.ToSlash(clean)
	info, err := fs.Stat(r.fsys, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s %q not found in the repository%s", field, dir, r.atRevision())
	case err != nil:
		return nil, fmt.Errorf("%s %q cannot be read: %w", field, dir, r.readError(dir, err))
	case !info.IsDir():
		return nil, fmt.Errorf("%s %q is not a directory; name the directory that holds Chart.yaml", field, dir)
	}
	if _, err := fs.Stat(r.fsys, path.Join(dir, "Chart.yaml")); err != nil {
		return nil, fmt.Errorf("%s %q holds no Chart.yaml; name a chart directory", field, dir)
	}

	rules := ignore.Empty()
	if data, err := r.readFile(path.Join(dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, ignore.HelmIgnore), err)
		}
	}
	rules.AddDefaults()

	var files []*archive.BufferedFile
	err = fs.WalkDir(r.fsys, dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(name, dir), "/")
		if rel == "" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if rules.Ignore(rel, info) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := r.readFile(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := r.countRead(name); err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: rel, ModTime: info.ModTime(), Data: bytes.TrimPrefix(data, []byte("\ufeff"))})
		return nil
	})
	return files, err
}

// renderChart renders the templates of c with hc's values, as helm
// template does, and returns the output of each template by its path,
// such as "web/templates/deployment.yaml".
func (r *renderer) renderChart(file string, hc *v1alpha1.HelmChart, c *chart.Chart) (rendered map[string]string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("helm could not render the chart: %v", p)
		}
	}()
	if c.Metadata.Type == "library" {
		return nil, fmt.Errorf("chart %s is a library chart, which renders nothing on its own; name an application chart that depends on it", c.Name())
	}
	caps, err := r.capabilities()
	if err != nil {
		return nil, err
	}
	if kv := c.Metadata.KubeVersion; kv != "" && !chartdeps.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart %s needs Kubernetes %s and the cluster runs %s", c.Name(), kv, caps.KubeVersion.Version)
	}
	if err := remoteSchemaRefs(c); err != nil {
		return nil, err
	}
	vals, err := r.helmValues(file, hc)
	if err != nil {
		return nil, err
	}
	if err := chartdeps.ProcessDependencies(c, vals); err != nil {
		return nil, fmt.Errorf("chart %s: dependencies: %w", c.Name(), err)
	}
	top, err := chartutil.ToRenderValues(c, vals, common.ReleaseOptions{
		Name: hc.Metadata.Name, Namespace: r.releaseNamespace(hc), Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", c.Name(), err)
	}
	if release, ok := top["Release"].(map[string]any); ok {
		release["Service"] = releaseService
	}
	eng := engine.Engine{}
	if hc.Spec.Lookup && r.opts.Lookup != nil {
		eng.CustomTemplateFuncs = template.FuncMap{"lookup": func(apiVersion, kind, namespace, name string) (map[string]any, error) {
			if kind == "Secret" {
				r.lookedUpSecret = true
			}
			return r.opts.Lookup(apiVersion, kind, namespace, name)
		}}
	}
	rendered, err = eng.RenderWithContext(context.Background(), c, top)
	if err != nil {
		return nil, fmt.Errorf("chart template failed: %w", err)
	}
	return rendered, nil
}

// releaseNamespace is .Release.Namespace: the HelmChart's namespace, else
// the Sync's target namespace, else "default".
func (r *renderer) releaseNamespace(hc *v1alpha1.HelmChart) string {
	return cmp.Or(hc.Metadata.Namespace, r.opts.TargetNamespace, "default")
}

// capabilities is .Capabilities: the cluster's version and API versions,
// or without a cluster those of the client-go driftless is built with.
func (r *renderer) capabilities() (*common.Capabilities, error) {
	version := cmp.Or(r.opts.KubeVersion, DefaultKubeVersion())
	kv, err := common.ParseKubeVersion(version)
	if err != nil {
		return nil, fmt.Errorf("kubernetes version %q cannot be read: %w", version, err)
	}
	apis := common.DefaultVersionSet
	if r.opts.APIVersions != nil {
		apis = common.VersionSet(r.opts.APIVersions)
	}
	return &common.Capabilities{KubeVersion: *kv, APIVersions: apis, HelmVersion: common.DefaultCapabilities.HelmVersion}, nil
}

// schemaRef finds the references of a JSON schema to other documents.
var schemaRef = regexp.MustCompile(`"\$(ref|dynamicRef|schema)"\s*:\s*"([^"]*)"`)

// remoteSchemaRefs returns an error if a values.schema.json of c or its
// subcharts refers to another document, which Helm would fetch from the
// network or read from the agent's disk.
func remoteSchemaRefs(c *chart.Chart) error {
	for _, m := range schemaRef.FindAllSubmatch(c.Schema, -1) {
		keyword, ref := string(m[1]), string(m[2])
		if keyword == "schema" && (strings.HasPrefix(ref, "http://json-schema.org/") || strings.HasPrefix(ref, "https://json-schema.org/")) ||
			keyword != "schema" && strings.HasPrefix(ref, "#") {
			continue
		}
		return fmt.Errorf("chart %s: values.schema.json refers to %q, which driftless does not fetch; put the schema under $defs and refer to it with #/$defs/…", c.Name(), ref)
	}
	for _, sub := range c.Dependencies() {
		if err := remoteSchemaRefs(sub); err != nil {
			return err
		}
	}
	return nil
}

// helmValues merges the values hc gives the chart, as Helm does: the
// values files in order, then valuesFrom in order, then the inline
// values, each over the one before. The chart's values.yaml is under them
// all (ToRenderValues adds it).
func (r *renderer) helmValues(file string, hc *v1alpha1.HelmChart) (map[string]any, error) {
	vals := map[string]any{}
	for i, name := range hc.Spec.ValuesFiles {
		clean := filepath.Clean(name)
		if filepath.IsAbs(name) || !filepath.IsLocal(clean) {
			return nil, fmt.Errorf("spec.valuesFiles[%d] %q is outside the repository; it is relative to the repository root and cannot leave it", i, name)
		}
		clean = filepath.ToSlash(clean)
		data, err := r.readFile(clean)
		switch {
		case errors.Is(err, ErrOverBudget):
			return nil, err
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("spec.valuesFiles[%d]: %s not found in the repository%s", i, clean, r.atRevision())
		case err != nil:
			return nil, fmt.Errorf("spec.valuesFiles[%d]: %s: %w", i, clean, err)
		}
		if err := r.countRead(clean); err != nil {
			return nil, err
		}
		m, err := common.ReadValues(data)
		if err != nil {
			return nil, fmt.Errorf("spec.valuesFiles[%d]: %s is not a YAML mapping of values: %w", i, clean, err)
		}
		vals = chartloader.MergeMaps(vals, m)
	}
	for i, ref := range hc.Spec.ValuesFrom {
		m, err := r.valuesFrom(ref)
		if err != nil {
			return nil, fmt.Errorf("spec.valuesFrom[%d]: %w", i, err)
		}
		vals = chartloader.MergeMaps(vals, m)
	}
	if v := hc.Spec.Values; v != nil && len(v.Raw) > 0 {
		var m map[string]any
		if err := yaml.Unmarshal(v.Raw, &m); err != nil {
			return nil, fmt.Errorf("spec.values is not a mapping of values: %w", err)
		}
		vals = chartloader.MergeMaps(vals, m)
	}
	return vals, nil
}

// secretValues reports whether hc's values hold secrets: a values file
// encrypted with SOPS, or values from a Secret.
func (r *renderer) secretValues(hc *v1alpha1.HelmChart) bool {
	for _, name := range hc.Spec.ValuesFiles {
		if r.decrypted[filepath.ToSlash(filepath.Clean(name))] {
			return true
		}
	}
	for _, ref := range hc.Spec.ValuesFrom {
		if ref.Kind == "Secret" {
			return true
		}
	}
	return false
}

// valuesFrom reads the values of one valuesFrom entry; nil for a missing
// optional one.
func (r *renderer) valuesFrom(ref v1alpha1.ValuesReference) (map[string]any, error) {
	key := cmp.Or(ref.Key, "values.yaml")
	what := fmt.Sprintf("%s %s key %s", ref.Kind, ref.Name, key)
	if r.opts.ValuesFrom == nil {
		return nil, fmt.Errorf("%s is read from the cluster, and this render has none; render with driftless build --sync, as the agent does", what)
	}
	data, err := r.opts.ValuesFrom(ref.Kind, ref.Name, key)
	switch {
	case errors.Is(err, ErrValuesNotFound) && ref.Optional:
		return nil, nil
	case errors.Is(err, ErrValuesNotFound):
		return nil, fmt.Errorf("%s: %w; create it, or mark the entry optional: true", what, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w: %w", what, ErrFetchFailed, err)
	}
	m, err := common.ReadValues(data)
	if err != nil {
		if ref.Kind == "Secret" {
			// The parser's message may quote the Secret's data.
			return nil, fmt.Errorf("%s is not a YAML mapping of values", what)
		}
		return nil, fmt.Errorf("%s is not a YAML mapping of values: %w", what, err)
	}
	return m, nil
}
