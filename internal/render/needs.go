package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// needs returns the objects u refers to that must exist before it: its
// namespace, what a workload's pod template mounts or runs as, and the
// Service behind an APIService or admission webhook. (The CRD of a custom
// resource is the plan's to find: see Object.Defines.)
func needs(u *unstructured.Unstructured) []Ref {
	gvk := u.GroupVersionKind()
	ns := u.GetNamespace()
	var refs []Ref
	if ns != "" {
		refs = append(refs, Ref{Kind: "Namespace", Name: ns})
	}
	if pod := podSpec(u); pod != nil {
		refs = append(refs, podReferences(pod, ns)...)
	}
	switch gvk.Group + "/" + gvk.Kind {
	case "apiregistration.k8s.io/APIService":
		if svc, ok, _ := unstructured.NestedMap(u.Object, "spec", "service"); ok {
			refs = append(refs, serviceRef(svc))
		}
	case "admissionregistration.k8s.io/MutatingWebhookConfiguration", "admissionregistration.k8s.io/ValidatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			if svc, ok, _ := unstructured.NestedMap(hm, "clientConfig", "service"); ok {
				refs = append(refs, serviceRef(svc))
			}
		}
	}
	return refs
}

func serviceRef(svc map[string]any) Ref {
	ns, _ := svc["namespace"].(string)
	name, _ := svc["name"].(string)
	return Ref{Kind: "Service", Namespace: ns, Name: name}
}

// podSpec returns the pod spec of a workload, or nil.
func podSpec(u *unstructured.Unstructured) map[string]any {
	gvk := u.GroupVersionKind()
	var path []string
	switch gvk.Group + "/" + gvk.Kind {
	case "/Pod":
		path = []string{"spec"}
	case "batch/CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	case "apps/Deployment", "apps/StatefulSet", "apps/DaemonSet", "apps/ReplicaSet", "/ReplicationController", "batch/Job":
		path = []string{"spec", "template", "spec"}
	default:
		return nil
	}
	m, _, _ := unstructured.NestedMap(u.Object, path...)
	return m
}

func podReferences(pod map[string]any, ns string) []Ref {
	var refs []Ref
	add := func(kind string, name any) {
		if s, ok := name.(string); ok && s != "" {
			refs = append(refs, Ref{Kind: kind, Namespace: ns, Name: s})
		}
	}
	add("ServiceAccount", pod["serviceAccountName"])
	for _, s := range list(pod["imagePullSecrets"]) {
		add("Secret", s["name"])
	}
	for _, v := range list(pod["volumes"]) {
		add("ConfigMap", field(v, "configMap", "name"))
		add("Secret", field(v, "secret", "secretName"))
		add("PersistentVolumeClaim", field(v, "persistentVolumeClaim", "claimName"))
		for _, src := range list(field(v, "projected", "sources")) {
			add("ConfigMap", field(src, "configMap", "name"))
			add("Secret", field(src, "secret", "name"))
		}
	}
	for _, key := range []string{"containers", "initContainers"} {
		for _, c := range list(pod[key]) {
			for _, e := range list(c["env"]) {
				add("ConfigMap", field(e, "valueFrom", "configMapKeyRef", "name"))
				add("Secret", field(e, "valueFrom", "secretKeyRef", "name"))
			}
			for _, e := range list(c["envFrom"]) {
				add("ConfigMap", field(e, "configMapRef", "name"))
				add("Secret", field(e, "secretRef", "name"))
			}
		}
	}
	return refs
}

func list(v any) []map[string]any {
	items, _ := v.([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func field(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		cm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = cm[p]
	}
	return cur
}
