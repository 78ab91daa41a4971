package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// HelmChartKind is the kind name of HelmChart.
const HelmChartKind = "HelmChart"

// HelmChart is a Helm chart to render, written in git among a Sync's
// manifests. It is read from the repository, never applied to the
// cluster: there is no CustomResourceDefinition for it. The render of a
// Sync replaces it with the objects the chart renders (see
// docs/rendering.md).
//
// metadata.name is the release name and metadata.namespace the release
// namespace; without one, the Sync's targetNamespace, else "default".
//
// It holds its own metadata type, not ObjectMeta: a HelmChart has a
// name, a namespace, labels and annotations and nothing else, and, not
// being a Kubernetes object, it gets no CustomResourceDefinition from
// make generate.
type HelmChart struct {
	// APIVersion is "driftless.dev/v1alpha1".
	APIVersion string `json:"apiVersion"`
	// Kind is "HelmChart".
	Kind     string            `json:"kind"`
	Metadata HelmChartMetadata `json:"metadata"`
	Spec     HelmChartSpec     `json:"spec"`
}

// HelmChartMetadata is the metadata of a HelmChart.
type HelmChartMetadata struct {
	// Name is the release name, .Release.Name in templates.
	Name string `json:"name"`
	// Namespace is the release namespace, .Release.Namespace in templates,
	// and the namespace of the chart's namespaced objects that name none.
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// HelmChartSpec says which chart to render and with which values.
type HelmChartSpec struct {
	// Chart is where the chart is: a directory of the repository, or a
	// chart repository or OCI registry.
	Chart ChartReference `json:"chart"`
	// Values are the inline values; they win over every other source.
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
	// ValuesFiles are files of the repository, merged in order over the
	// chart's values.yaml.
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// ValuesFrom are keys of ConfigMaps and Secrets in the Sync's
	// namespace, merged in order over the values files.
	ValuesFrom []ValuesReference `json:"valuesFrom,omitempty"`
	// IncludeCRDs renders the chart's crds/ directories, applied before the
	// chart's other objects and upgraded like any object.
	IncludeCRDs bool `json:"includeCRDs,omitempty"`
	// Lookup answers the chart's lookup function from the cluster, read
	// as the Sync reads (a tenant Sync as its ServiceAccount). Off, and in
	// a render without a cluster, lookup returns nothing, as in helm
	// template.
	Lookup bool `json:"lookup,omitempty"`
}

// ChartReference names a chart: Path, or Repository and Name, or OCI.
type ChartReference struct {
	// Path is a chart directory of the repository, such as "charts/web".
	Path string `json:"path,omitempty"`
	// Repository is the URL of an HTTP Helm repository that serves Name.
	Repository string `json:"repository,omitempty"`
	// Name is the chart's name in Repository.
	Name string `json:"name,omitempty"`
	// OCI is the chart's reference in an OCI registry, such as
	// "oci://registry.example.com/charts/web".
	OCI string `json:"oci,omitempty"`
	// Version is a version or semver range of a chart from Repository or
	// OCI, such as ">=1.2 <2" or "1.4.x".
	Version string `json:"version,omitempty"`
	// SecretRef names a Secret in the Sync's namespace with the
	// credentials (basic auth or token) and CA of Repository or OCI.
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// ValuesReference names a key of a ConfigMap or Secret that holds values.
type ValuesReference struct {
	// Kind is ConfigMap or Secret.
	Kind string `json:"kind"`
	// Name of the ConfigMap or Secret in the Sync's namespace.
	Name string `json:"name"`
	// Key holds the values as YAML; default "values.yaml".
	Key string `json:"key,omitempty"`
	// Optional lets the object or key be missing.
	Optional bool `json:"optional,omitempty"`
}
