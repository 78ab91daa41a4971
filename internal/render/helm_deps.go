package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	chartdeps "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/driftless/driftless/api/v1alpha1"
)

// addDependencies adds to c the dependencies its Chart.yaml lists and its
// charts/ does not hold, as helm dependency build would before helm
// template: from their HTTP repositories and OCI registries through
// r.opts.Charts, and file:// ones from the repository. dir is the chart's
// directory in the repository, or "" for a chart fetched from a
// repository, which may have no file:// dependency. When c has a
// Chart.lock, its versions are used, and it must match Chart.yaml.
//
// Only c's own dependencies are added: a dependency's dependencies must
// be in its charts/, as helm package puts them. On any error c is left
// partly completed and must not be rendered.
func (r *renderer) addDependencies(file string, hc *v1alpha1.HelmChart, c *chart.Chart, dir string) error {
	var missing []*chart.Dependency
	for _, d := range c.Metadata.Dependencies {
		if d != nil && !hasSubchart(c, d.Name) {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	locked, err := lockedVersions(c)
	if err != nil {
		return err
	}
	for _, d := range missing {
		if hasSubchart(c, d.Name) {
			continue // the same chart under another alias
		}
		version := d.Version
		if v, ok := locked[lockKey(d)]; ok {
			version = v
		}
		sub, err := r.dependency(file, hc, c, dir, d, version)
		if err != nil {
			return err
		}
		if sub.Name() != d.Name {
			return fmt.Errorf("%s: the chart fetched is named %s; the name in Chart.yaml must be the chart's own", dependencyName(c, d), sub.Name())
		}
		c.AddDependency(sub)
	}
	return nil
}

func hasSubchart(c *chart.Chart, name string) bool {
	for _, sub := range c.Dependencies() {
		if sub.Name() == name {
			return true
		}
	}
	return false
}

// dependencyName names dependency d of c in errors: "chart web:
// dependency redis", with its alias if it has one.
func dependencyName(c *chart.Chart, d *chart.Dependency) string {
	if d.Alias != "" && d.Alias != d.Name {
		return fmt.Sprintf("chart %s: dependency %s (alias %s)", c.Name(), d.Name, d.Alias)
	}
	return fmt.Sprintf("chart %s: dependency %s", c.Name(), d.Name)
}

// dependency fetches or reads one dependency of c at version (a version
// or a range).
func (r *renderer) dependency(file string, hc *v1alpha1.HelmChart, c *chart.Chart, dir string, d *chart.Dependency, version string) (*chart.Chart, error) {
	what := dependencyName(c, d)
	repo := strings.TrimSpace(d.Repository)
	ref := v1alpha1.ChartReference{Name: d.Name, Version: version}
	switch {
	case repo == "":
		return nil, fmt.Errorf("%s is in Chart.yaml but not in charts/, and names no repository; set its repository (https://, oci:// or file://) or vendor it in charts/", what)
	case strings.HasPrefix(repo, "file://"):
		return r.localDependency(what, dir, d, strings.TrimPrefix(repo, "file://"))
	case strings.HasPrefix(repo, "@"), strings.HasPrefix(repo, "alias:"):
		return nil, fmt.Errorf("%s names repository %s, a name of helm repo add, which driftless does not know; write the repository's URL (https://… or oci://…) in Chart.yaml", what, repo)
	case strings.HasPrefix(repo, "oci://"):
		ref.OCI = repo
	case strings.HasPrefix(repo, "https://"), strings.HasPrefix(repo, "http://"):
		ref.Repository = repo
	default:
		return nil, fmt.Errorf("%s: repository %s is not an https://, oci:// or file:// address", what, redactURL(repo))
	}
	source := redactURL(repo)
	if r.opts.Charts == nil {
		return nil, fmt.Errorf("%s from %s: dependencies from repositories need the agent's chart fetcher; driftless build and diff without --sync render only dependencies vendored in charts/ or from file://", what, source)
	}
	ref.SecretRef = dependencyCredentials(hc.Spec.Chart, repo)
	fetched, err := r.opts.Charts.FetchChart(ChartRequest{Chart: ref, HelmChart: file})
	if err != nil {
		return nil, fmt.Errorf("%s %s from %s: %w: %w", what, orLatest(version), source, ErrFetchFailed, err)
	}
	return r.loadFetched(what+" from "+source, fetched)
}

// orLatest words an empty version.
func orLatest(version string) string {
	if version == "" {
		return "(latest)"
	}
	return version
}

// localDependency reads a file:// dependency: a chart directory of the
// repository, relative to the chart's directory dir.
func (r *renderer) localDependency(what, dir string, d *chart.Dependency, rel string) (*chart.Chart, error) {
	if dir == "" {
		return nil, fmt.Errorf("%s: file://%s is read from the repository, and this chart was fetched from a chart repository; the chart must hold it in charts/", what, rel)
	}
	joined := path.Join(dir, filepath.ToSlash(rel))
	if filepath.IsAbs(rel) || !filepath.IsLocal(filepath.FromSlash(joined)) {
		return nil, fmt.Errorf("%s: file://%s leads outside the repository; a file:// dependency must be a chart directory inside it", what, rel)
	}
	files, err := r.chartFiles(what+" (file://"+rel+")", joined)
	if err != nil {
		return nil, err
	}
	sub, err := chartloader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("%s: chart %s cannot be loaded: %w", what, joined, err)
	}
	if d.Version != "" && !chartdeps.IsCompatibleRange(d.Version, sub.Metadata.Version) {
		return nil, fmt.Errorf("%s: the chart at %s is version %s, which %q in Chart.yaml does not allow", what, joined, sub.Metadata.Version, d.Version)
	}
	return sub, nil
}

// lockedVersions returns the versions c's Chart.lock pins, by lockKey, or
// nil without a Chart.lock. A Chart.lock whose digest does not match the
// dependencies of Chart.yaml is an error, as in helm dependency build.
func lockedVersions(c *chart.Chart) (map[string]string, error) {
	if c.Lock == nil {
		return nil, nil
	}
	if sum, err := lockDigest(c.Metadata.Dependencies, c.Lock.Dependencies); err != nil || sum != c.Lock.Digest {
		return nil, fmt.Errorf("chart %s: Chart.lock is out of sync with the dependencies in Chart.yaml (it was made for other dependencies); run helm dependency update in the chart's directory and commit Chart.lock", c.Name())
	}
	locked := map[string]string{}
	for _, d := range c.Lock.Dependencies {
		if d != nil {
			locked[lockKey(d)] = d.Version
		}
	}
	return locked, nil
}

func lockKey(d *chart.Dependency) string {
	return d.Name + "\x00" + strings.TrimSuffix(strings.TrimSpace(d.Repository), "/")
}

// lockDigest is the digest of Chart.lock for the dependencies req of
// Chart.yaml and those it locked, as Helm computes it
// (internal/resolver.HashReq in Helm v4).
func lockDigest(req, lock []*chart.Dependency) (string, error) {
	data, err := json.Marshal([2][]*chart.Dependency{req, lock})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// dependencyCredentials is the secretRef a dependency in repository gets:
// the HelmChart's own, when the dependency is on the same host as the
// HelmChart's chart repository or registry; none for any other host, and
// none for a chart of the repository (spec.chart.path), which has no
// secretRef.
func dependencyCredentials(chartRef v1alpha1.ChartReference, repository string) *v1alpha1.LocalObjectReference {
	if chartRef.SecretRef == nil {
		return nil
	}
	own, ok := hostOf(chartRef.Repository + chartRef.OCI)
	if !ok {
		return nil
	}
	if host, ok := hostOf(repository); ok && host == own {
		ref := *chartRef.SecretRef
		return &ref
	}
	return nil
}

// hostOf is the host (with its port) of address, lower case.
func hostOf(address string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(address))
	if err != nil || u.Host == "" {
		return "", false
	}
	return strings.ToLower(u.Host), true
}

// redactURL drops the user information of a URL, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an invalid URL)"
	}
	u.User = nil
	return u.String()
}
