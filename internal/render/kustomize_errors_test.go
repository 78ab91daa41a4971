package render

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRenderKustomizationErrors(t *testing.T) {
	const deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"
	tests := []struct {
		name        string
		files       map[string]string
		allowRemote bool
		want        []string
	}{{
		name: "a missing resource names the kustomization and the path",
		files: map[string]string{
			"app/kustomization.yaml": "resources:\n- deployment.yaml\n- service.yaml\n",
			"app/deployment.yaml":    deploy,
		},
		want: []string{`app/kustomization.yaml: resources entry "service.yaml" not found: app/service.yaml is not in the repository at revision 0123456`},
	}, {
		name: "a missing file in a base names the base's kustomization",
		files: map[string]string{
			"app/kustomization.yaml":  "resources: [../base]\n",
			"base/kustomization.yaml": "resources: [deployment.yaml]\npatches:\n- path: gone.yaml\nconfigMapGenerator:\n- name: c\n  files: [app.properties]\n",
			"base/deployment.yaml":    deploy,
		},
		want: []string{
			`base/kustomization.yaml: patches entry "gone.yaml" not found: base/gone.yaml is not in the repository at revision 0123456`,
			`base/kustomization.yaml: configMapGenerator files entry "app.properties" not found: base/app.properties is not in the repository at revision 0123456`,
		},
	}, {
		name: "a directory named as a base needs a kustomization",
		files: map[string]string{
			"app/kustomization.yaml": "resources: [../plain]\n",
			"plain/cm.yaml":          configMap("a"),
		},
		want: []string{`app/kustomization.yaml: resources entry "../plain" is a directory without a kustomization.yaml, kustomization.yml or Kustomization; add one, or name its files`},
	}, {
		name: "an env file of a secretGenerator that is not UTF-8, which is not quoted",
		files: map[string]string{
			"app/kustomization.yaml": "secretGenerator:\n- name: s\n  envs: [secret.env]\n",
			"app/secret.env":         "USER=me\nPASSWORD=hunter2\xff\n",
		},
		want: []string{`app/kustomization.yaml: secretGenerator envs entry "secret.env" is not valid UTF-8 at line 2; save the file as UTF-8`},
	}, {
		name: "a strategic merge patch that matches nothing",
		files: map[string]string{
			"app/kustomization.yaml": "resources: [deployment.yaml]\npatches:\n- path: patch.yaml\n",
			"app/deployment.yaml":    deploy,
			"app/patch.yaml":         "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  replicas: 2\n",
		},
		want: []string{`app/kustomization.yaml: kustomize build failed: no resource matches strategic merge patch "Deployment.v1.apps/api.[noNs]": no matches for Id Deployment.v1.apps/api.[noNs]; failed to find unique target for patch Deployment.v1.apps/api.[noNs]`},
	}, {
		name: "a remote base",
		files: map[string]string{
			"app/kustomization.yaml": "resources:\n- github.com/example/fleet//base?ref=v1\n",
		},
		want: []string{`app/kustomization.yaml: resources entry "github.com/example/fleet//base?ref=v1" is remote; remote bases and resources are refused (spec.kustomize.allowRemote is off): copy what it names into the repository`},
	}, {
		name: "a remote base with allowRemote, rendered where nothing fetches it",
		files: map[string]string{
			"app/kustomization.yaml": "resources:\n- git@github.com:example/fleet.git//base\n",
		},
		allowRemote: true,
		want:        []string{`app/kustomization.yaml: resources entry "git@github.com:example/fleet.git//base" is remote, and remote bases are not fetched here: render it with the agent or with driftless build --allow-remote, or copy what it names into the repository`},
	}, {
		name: "remote files anywhere a kustomization names files",
		files: map[string]string{
			"app/kustomization.yaml": "bases: [ssh://git@example.com/fleet.git]\npatches:\n- path: https://example.com/patch.yaml\nconfigMapGenerator:\n- name: c\n  files: [key=https://example.com/app.properties]\n",
		},
		want: []string{
			`app/kustomization.yaml: bases entry "ssh://git@example.com/fleet.git" is remote; remote bases and resources are refused (spec.kustomize.allowRemote is off): copy what it names into the repository`,
			`app/kustomization.yaml: files entry "https://example.com/app.properties" is remote; remote bases and resources are refused (spec.kustomize.allowRemote is off): copy what it names into the repository`,
			`app/kustomization.yaml: path entry "https://example.com/patch.yaml" is remote; remote bases and resources are refused (spec.kustomize.allowRemote is off): copy what it names into the repository`,
		},
	}, {
		name: "a path out of the repository",
		files: map[string]string{
			"app/kustomization.yaml": "resources: [../../secrets]\n",
		},
		want: []string{`app/kustomization.yaml: resources entry "../../secrets" leads out of the repository, to ../secrets; a kustomization may name files anywhere in the repository, but not outside it`},
	}, {
		name: "an absolute path",
		files: map[string]string{
			"app/kustomization.yaml": "resources: [/etc/passwd]\n",
		},
		want: []string{`app/kustomization.yaml: resources entry "/etc/passwd" is an absolute path; name it relative to app`},
	}, {
		name: "invalid YAML",
		files: map[string]string{
			"app/kustomization.yaml": "resources:\n- a.yaml\n  namePrefix: x-\n",
		},
		want: []string{`app/kustomization.yaml: not a valid kustomization: yaml: line 3: mapping values are not allowed in this context`},
	}, {
		name: "a field Kustomize does not know",
		files: map[string]string{
			"app/kustomization.yaml": "resource: [a.yaml]\n",
		},
		want: []string{`app/kustomization.yaml: not a valid kustomization: json: unknown field "resource"`},
	}, {
		name: "two kustomization files in one directory",
		files: map[string]string{
			"app/kustomization.yaml": "resources: []\n",
			"app/Kustomization":      "resources: []\n",
		},
		want: []string{`app/kustomization.yaml: app holds both kustomization.yaml and Kustomization; Kustomize builds a directory from one, so keep one`},
	}, {
		name: "Helm charts",
		files: map[string]string{
			"app/kustomization.yaml": "helmCharts:\n- name: web\n  repo: https://charts.example.com\n",
		},
		want: []string{`app/kustomization.yaml: helmCharts: driftless does not inflate Helm charts inside Kustomize; remove it, and render the chart with a HelmChart document`},
	}, {
		name: "a HelmChart document as a resource",
		files: map[string]string{
			"app/kustomization.yaml": "resources: [helmchart.yaml]\n",
			"app/helmchart.yaml":     "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: web}\nspec:\n  chart: {path: charts/web}\n",
		},
		want: []string{`app/kustomization.yaml → app/helmchart.yaml: HelmChart: the kustomization lists a HelmChart, which Kustomize cannot render; list the HelmChart's file or directory in the Sync's paths, beside the kustomization`},
	}, {
		name: "an exec function",
		files: map[string]string{
			"app/kustomization.yaml": "resources: []\ntransformers: [fn.yaml]\n",
			"app/fn.yaml": `apiVersion: example.com/v1
kind: Sed
metadata:
  name: sed
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: /bin/sh
`,
		},
		want: []string{`app/fn.yaml: Sed of example.com/v1 is not one of Kustomize's builtin generators and transformers (apiVersion: builtin); driftless runs no exec, container or Go plugin functions`},
	}, {
		name: "a builtin transformer that names a remote patch",
		files: map[string]string{
			"app/kustomization.yaml": "resources: []\ntransformers:\n- |\n  apiVersion: builtin\n  kind: PatchTransformer\n  metadata: {name: p}\n  path: https://example.com/patch.yaml\n",
		},
		want: []string{`app/kustomization.yaml: path entry "https://example.com/patch.yaml" is remote; remote bases and resources are refused (spec.kustomize.allowRemote is off): copy what it names into the repository`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, Options{Paths: []string{"app"}, Revision: "0123456789abcdef", Kustomize: KustomizeOptions{AllowRemote: tt.allowRemote}})
			if objs != nil {
				t.Errorf("got %d objects with errors, want none", len(objs))
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderNeverFetchesRemoteKustomizeResources(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(configMap("fetched")))
	}))
	t.Cleanup(srv.Close)
	files := map[string]string{
		"app/kustomization.yaml": "resources:\n- " + srv.URL + "/cm.yaml\n- " + srv.URL + "/fleet.git//base\n",
	}
	for _, allow := range []bool{false, true} {
		objs, err := render(t, files, Options{Paths: []string{"app"}, Kustomize: KustomizeOptions{AllowRemote: allow}})
		if objs != nil || len(Errors(err)) != 2 {
			t.Errorf("allowRemote %v: got %d objects and errors %v, want no objects and two errors", allow, len(objs), err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

func TestRenderRefusesSymbolicLinksOutOfTheRepository(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte(configMap("stolen")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "kustomization.yaml"), []byte("resources: [secret.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		links map[string]string // link in the checkout → target
		files map[string]string
		want  []string
	}{{
		name:  "a resource that links out",
		links: map[string]string{"app/cm.yaml": filepath.Join(outside, "secret.yaml")},
		files: map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n"},
		want:  []string{`app/kustomization.yaml: resources entry "cm.yaml": app/cm.yaml is, or passes through, a symbolic link that leads out of the repository; a kustomization may name files anywhere in the repository, but not outside it`},
	}, {
		name:  "a base that links out",
		links: map[string]string{"base": outside},
		files: map[string]string{"app/kustomization.yaml": "resources: [../base]\n"},
		want:  []string{`app/kustomization.yaml: resources entry "../base": base is, or passes through, a symbolic link that leads out of the repository; a kustomization may name files anywhere in the repository, but not outside it`},
	}, {
		name:  "a file behind a directory that links out",
		links: map[string]string{"app/config": outside},
		files: map[string]string{"app/kustomization.yaml": "configMapGenerator:\n- name: c\n  files: [config/secret.yaml]\n"},
		want:  []string{`app/kustomization.yaml: configMapGenerator files entry "config/secret.yaml": app/config/secret.yaml is, or passes through, a symbolic link that leads out of the repository; a kustomization may name files anywhere in the repository, but not outside it`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := checkout(t, tt.files)
			for link, target := range tt.links {
				if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(link))); err != nil {
					t.Fatal(err)
				}
			}
			objs, err := Render(Options{Root: root, Paths: []string{"app"}, Scope: cluster})
			if objs != nil {
				t.Errorf("got %d objects with errors, want none", len(objs))
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), outside) {
				t.Errorf("error names the directory outside the checkout: %v", err)
			}
		})
	}
}

func TestRenderFollowsSymbolicLinksInsideTheRepository(t *testing.T) {
	root := checkout(t, map[string]string{
		"app/kustomization.yaml":    "resources: [../shared-link, cm.yaml]\n",
		"shared/kustomization.yaml": "resources: [shared.yaml]\n",
		"shared/shared.yaml":        configMap("shared"),
		"real/cm.yaml":              configMap("a"),
	})
	for link, target := range map[string]string{"shared-link": "shared", "app/cm.yaml": "../real/cm.yaml"} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := Render(Options{Root: root, Paths: []string{"app"}, Scope: cluster})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ConfigMap/default/shared", "ConfigMap/default/a"}, refs(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func refs(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, ref(o.decoded()))
	}
	return out
}

func TestRenderKustomizeErrorsAreRenderErrors(t *testing.T) {
	_, err := render(t, map[string]string{"app/kustomization.yaml": "resources: [gone.yaml]\n"}, Options{Paths: []string{"app"}})
	var e *Error
	if !errors.As(err, &e) || e.Origin.Path != "app/kustomization.yaml" {
		t.Errorf("errors.As(*Error) = %v, want an *Error at app/kustomization.yaml", e)
	}
}
