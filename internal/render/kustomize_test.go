package render

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/driftless/driftless/api/v1alpha1"
)

// shop is a repository laid out as platform teams lay theirs out: a base,
// a component, and an overlay per environment.
var shop = map[string]string{
	"apps/web/base/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- deployment.yaml
- service.yaml
configMapGenerator:
- name: web-config
  literals:
  - GREETING=hello
`,
	"apps/web/base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        envFrom:
        - configMapRef:
            name: web-config
`,
	"apps/web/base/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
`,
	"apps/web/components/pdb/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources:
- pdb.yaml
`,
	"apps/web/components/pdb/pdb.yaml": `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
`,
	"apps/web/overlays/production/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: shop-production
namePrefix: prod-
nameSuffix: -eu
resources:
- ../../base
components:
- ../../components/pdb
configMapGenerator:
- name: web-config
  behavior: merge
  literals:
  - GREETING=welcome
patches:
- path: replicas.yaml
- target: {kind: Deployment, name: web}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/image
      value: nginx:1.28
replacements:
- source: {kind: Deployment, name: web, fieldPath: spec.template.spec.containers.0.image}
  targets:
  - select: {kind: Deployment, name: web}
    fieldPaths: [metadata.annotations.image]
    options: {create: true}
`,
	"apps/web/overlays/production/replicas.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
`,
	"apps/web/overlays/staging/kustomization.yaml": `resources:
- ../../base
namespace: shop-staging
labels:
- pairs: {team: shop}
commonAnnotations:
  owner: shop-team
images:
- name: nginx
  newTag: "1.29"
replicas:
- name: web
  count: 2
secretGenerator:
- name: web-token
  envs: [token.env]
generatorOptions:
  disableNameSuffixHash: true
`,
	"apps/web/overlays/staging/token.env": "TOKEN=not-a-real-token\n",
}

// kustomizeBuild builds dir of files as `kustomize build` does: with
// Kustomize alone, reading the disk.
func kustomizeBuild(t *testing.T, files map[string]string, dir string) []map[string]any {
	t.Helper()
	root := checkout(t, files)
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []map[string]any
	for _, res := range m.Resources() {
		data, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		v, err := decodeJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v.(map[string]any))
	}
	return out
}

// withoutMarks returns the objects as Kustomize built them: without the
// label and annotation render adds.
func withoutMarks(objs []Object) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		u := o.decoded().DeepCopy()
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations", v1alpha1.OriginAnnotation)
		unstructured.RemoveNestedField(u.Object, "metadata", "labels", v1alpha1.SyncLabel)
		for _, field := range []string{"annotations", "labels"} {
			if m, _, _ := unstructured.NestedMap(u.Object, "metadata", field); len(m) == 0 {
				unstructured.RemoveNestedField(u.Object, "metadata", field)
			}
		}
		out = append(out, u.Object)
	}
	return out
}

// byName indexes objects by "Kind/name".
func byName(objs []Object) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.decoded().GetKind()+"/"+o.decoded().GetName()] = o.decoded()
	}
	return out
}

func TestRenderBuildsKustomizationsAsKustomizeDoes(t *testing.T) {
	for _, dir := range []string{"apps/web/overlays/production", "apps/web/overlays/staging", "apps/web/base"} {
		t.Run(dir, func(t *testing.T) {
			objs, err := render(t, shop, Options{Paths: []string{dir}, SyncLabel: "driftless-system.shop", TargetNamespace: "shop"})
			if err != nil {
				t.Fatal(err)
			}
			want := kustomizeBuild(t, shop, dir)
			// Render gives the objects of the base the Sync's namespace.
			for _, o := range want {
				if meta := o["metadata"].(map[string]any); meta["namespace"] == nil {
					meta["namespace"] = "shop"
				}
			}
			if diff := cmp.Diff(want, withoutMarks(objs)); diff != "" {
				t.Errorf("render differs from kustomize build (-kustomize +render):\n%s", diff)
			}
		})
	}
}

func TestRenderBuildsAnOverlayWithEveryKindOfChange(t *testing.T) {
	objs, err := render(t, shop, Options{Paths: []string{"apps/web/overlays/production"}, SyncLabel: "driftless-system.shop"})
	if err != nil {
		t.Fatal(err)
	}

	got := byName(objs)
	var configMap string
	for name := range got {
		if strings.HasPrefix(name, "ConfigMap/prod-web-config-eu-") {
			configMap = strings.TrimPrefix(name, "ConfigMap/")
		}
	}
	if configMap == "" {
		t.Fatalf("no ConfigMap prod-web-config-eu-<hash> among %v", slices.Sorted(maps.Keys(got)))
	}
	deploy := got["Deployment/prod-web-eu"]
	if deploy == nil {
		t.Fatalf("no Deployment prod-web-eu among %v", slices.Sorted(maps.Keys(got)))
	}
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	container := containers[0].(map[string]any)
	ref := container["envFrom"].([]any)[0].(map[string]any)["configMapRef"].(map[string]any)["name"]
	checks := []struct {
		what      string
		got, want any
	}{
		{"the Deployment's ConfigMap (generator hash suffix)", ref, configMap},
		{"the ConfigMap's merged literal", got["ConfigMap/"+configMap].Object["data"], map[string]any{"GREETING": "welcome"}},
		{"replicas (strategic merge patch)", deploy.Object["spec"].(map[string]any)["replicas"], int64(3)},
		{"image (JSON 6902 patch)", container["image"], "nginx:1.28"},
		{"image annotation (replacement)", deploy.GetAnnotations()["image"], "nginx:1.28"},
		{"namespace", deploy.GetNamespace(), "shop-production"},
		{"the component's PodDisruptionBudget", got["PodDisruptionBudget/prod-web-eu"] != nil, true},
		{"the sync label", deploy.GetLabels()[v1alpha1.SyncLabel], "driftless-system.shop"},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.what, diff)
		}
	}
}

func TestRenderSaysWhichFileEachKustomizedObjectCameFrom(t *testing.T) {
	objs, err := render(t, shop, Options{Paths: []string{"apps/web/overlays/production"}, Revision: "0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	const overlay = "apps/web/overlays/production/kustomization.yaml"
	want := map[string]string{
		"Deployment":          "apps/web/base/deployment.yaml",
		"Service":             "apps/web/base/service.yaml",
		"ConfigMap":           "apps/web/base/kustomization.yaml", // its generator
		"PodDisruptionBudget": "apps/web/components/pdb/pdb.yaml",
	}
	for _, o := range objs {
		kind := o.decoded().GetKind()
		if diff := cmp.Diff(Origin{Path: overlay, From: want[kind]}, o.Origin); diff != "" {
			t.Errorf("%s origin (-want +got):\n%s", kind, diff)
		}
		annotations := o.decoded().GetAnnotations()
		if got, want := annotations[v1alpha1.OriginAnnotation], overlay+" → "+want[kind]+"@0123456"; got != want {
			t.Errorf("%s annotation %s = %q, want %q", kind, v1alpha1.OriginAnnotation, got, want)
		}
		if _, ok := annotations[originAnnotation]; ok {
			t.Errorf("%s keeps Kustomize's %s annotation, which the kustomization did not ask for", kind, originAnnotation)
		}
	}
}

func TestRenderKeepsOriginAnnotationsAKustomizationAsksFor(t *testing.T) {
	files := map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\nbuildMetadata: [originAnnotations]\n",
		"app/cm.yaml":            configMap("a"),
	}
	objs, err := render(t, files, Options{Paths: []string{"app"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].decoded().GetAnnotations()[originAnnotation]; got != "path: cm.yaml\n" {
		t.Errorf("annotation %s = %q, want Kustomize's %q", originAnnotation, got, "path: cm.yaml\n")
	}
	if got, want := objs[0].Origin.From, "app/cm.yaml"; got != want {
		t.Errorf("Origin.From = %q, want %q", got, want)
	}
}

func TestRenderFindsKustomizations(t *testing.T) {
	files := map[string]string{
		"clusters/eu/web/kustomization.yaml":   "resources: [web.yaml]\n",
		"clusters/eu/web/web.yaml":             configMap("web"),
		"clusters/eu/web/unlisted.yaml":        configMap("not-listed"),
		"clusters/eu/api/kustomization.yml":    "resources: [api.yaml]\n",
		"clusters/eu/api/api.yaml":             configMap("api"),
		"clusters/eu/db/Kustomization":         "resources: [db.yaml]\n",
		"clusters/eu/db/db.yaml":               configMap("db"),
		"clusters/eu/namespace.yaml":           "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: eu\n",
		"clusters/us/kustomization.yaml":       "resources: [us.yaml]\n",
		"clusters/us/us.yaml":                  configMap("us"),
		"clusters/us/nested/kustomization.yml": "resources: [nested.yaml]\n",
		"clusters/us/nested/nested.yaml":       configMap("nested"),
	}
	tests := []struct {
		name  string
		paths []string
		want  []rendered
	}{{
		name:  "a directory in paths that holds a kustomization is built, and its other files are not read",
		paths: []string{"clusters/eu/web"},
		want:  []rendered{{Origin{Path: "clusters/eu/web/kustomization.yaml", From: "clusters/eu/web/web.yaml"}, "ConfigMap/default/web"}},
	}, {
		name:  "walking a directory builds each kustomization it reaches, under any of its three names, and reads the plain files beside them",
		paths: []string{"clusters/eu"},
		want: []rendered{
			{Origin{Path: "clusters/eu/api/kustomization.yml", From: "clusters/eu/api/api.yaml"}, "ConfigMap/default/api"},
			{Origin{Path: "clusters/eu/db/Kustomization", From: "clusters/eu/db/db.yaml"}, "ConfigMap/default/db"},
			{Origin{Path: "clusters/eu/namespace.yaml", Line: 1}, "Namespace/eu"},
			{Origin{Path: "clusters/eu/web/kustomization.yaml", From: "clusters/eu/web/web.yaml"}, "ConfigMap/default/web"},
		},
	}, {
		name:  "a kustomization is not walked into: one below it is built only if it names it",
		paths: []string{"clusters/us"},
		want:  []rendered{{Origin{Path: "clusters/us/kustomization.yaml", From: "clusters/us/us.yaml"}, "ConfigMap/default/us"}},
	}, {
		name:  "a path naming a kustomization file builds its directory",
		paths: []string{"clusters/eu/db/Kustomization"},
		want:  []rendered{{Origin{Path: "clusters/eu/db/Kustomization", From: "clusters/eu/db/db.yaml"}, "ConfigMap/default/db"}},
	}, {
		name:  "a kustomization reached through two paths is built once",
		paths: []string{"clusters/eu/web", "clusters/eu/web/kustomization.yaml", "clusters/eu/web"},
		want:  []rendered{{Origin{Path: "clusters/eu/web/kustomization.yaml", From: "clusters/eu/web/web.yaml"}, "ConfigMap/default/web"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, files, Options{Paths: tt.paths})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderSettlesKustomizedObjectsLikeOthers(t *testing.T) {
	files := map[string]string{
		"app/kustomization.yaml": "resources: [a.yaml, ../shared/role.yaml]\n",
		"app/a.yaml":             configMap("a") + "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n  namespace: ignored\n",
		"shared/role.yaml":       "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
		"plain/a.yaml":           configMap("a"),
	}
	t.Run("namespaces are defaulted and cluster-scoped objects lose theirs", func(t *testing.T) {
		objs, err := render(t, files, Options{Paths: []string{"app"}, TargetNamespace: "team"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, ref(o.decoded()))
		}
		want := []string{"ConfigMap/team/a", "ClusterRole/reader", "Namespace/team"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
	})
	t.Run("an object both a kustomization and a plain file define is defined twice", func(t *testing.T) {
		_, err := render(t, files, Options{Paths: []string{"app", "plain"}})
		want := []string{"plain/a.yaml:1 (document 0): ConfigMap/default/a: defined twice: app/kustomization.yaml → app/a.yaml and plain/a.yaml#0; remove one"}
		if diff := cmp.Diff(want, messages(err)); diff != "" {
			t.Errorf("errors (-want +got):\n%s", diff)
		}
	})
}

func TestRenderForgetsTheOpenAPISchemaOfAKustomization(t *testing.T) {
	// A custom schema that defines no kinds: with it, a strategic merge
	// patch replaces a StatefulSet's containers instead of merging them.
	files := map[string]string{
		"custom/kustomization.yaml": "resources: [cm.yaml]\nopenapi:\n  path: schema.json\n",
		"custom/schema.json":        `{"swagger": "2.0", "info": {"title": "none", "version": "v1"}, "paths": {}, "definitions": {}}`,
		"custom/cm.yaml":            configMap("custom"),
		"db/kustomization.yaml":     "resources: [db.yaml]\npatches:\n- path: memory.yaml\n",
		"db/db.yaml":                statefulSetDB,
		"db/memory.yaml":            memoryPatchDB,
	}
	objs, err := render(t, files, Options{Paths: []string{"custom", "db"}})
	if err != nil {
		t.Fatal(err)
	}
	db := byName(objs)["StatefulSet/db"]
	containers, _, _ := unstructured.NestedSlice(db.Object, "spec", "template", "spec", "containers")
	want := []any{map[string]any{"name": "db", "image": "postgres:17", "resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}}
	if diff := cmp.Diff(want, containers); diff != "" {
		t.Errorf("containers of the StatefulSet built after a kustomization with its own schema (-want +got):\n%s", diff)
	}
}

func TestRenderBuildsKustomizationsConcurrently(t *testing.T) {
	root := checkout(t, shop)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = Render(Options{Root: root, Paths: []string{"apps/web/overlays/production", "apps/web/overlays/staging"}, Scope: cluster})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
