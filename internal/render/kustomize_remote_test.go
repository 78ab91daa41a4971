package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeRemotes serves remote repositories from directories of files,
// by repository address.
type fakeRemotes struct {
	t       *testing.T
	repos   map[string]map[string]string
	fetched []RemoteBase
}

func (f *fakeRemotes) FetchRemote(b RemoteBase) (RemoteTree, error) {
	f.fetched = append(f.fetched, b)
	files, ok := f.repos[b.Repo]
	if b.Ref == "v9" {
		return RemoteTree{}, errors.New(`ref "v9" is neither a tag nor a branch of ` + b.Repo)
	}
	if !ok {
		return RemoteTree{}, errors.New("fetch failed: connection refused")
	}
	return RemoteTree{Dir: checkout(f.t, files), Revision: "fedcba9876543210"}, nil
}

// remoteBase is a base in a second repository: a Deployment and a
// generated ConfigMap it takes its environment from.
var remoteBase = map[string]string{
	"base/kustomization.yaml": "resources: [deployment.yaml]\nconfigMapGenerator:\n- name: web-config\n  literals: [GREETING=hello]\n",
	"base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx
        envFrom:
        - configMapRef: {name: web-config}
`,
	"outside/kustomization.yaml": "resources: [../../secrets]\n",
	"nested/kustomization.yaml":  "resources:\n- https://git.example.com/org/other.git//base\n",
}

func TestRenderFetchesRemoteBasesWithAllowRemote(t *testing.T) {
	remotes := &fakeRemotes{t: t, repos: map[string]map[string]string{"https://git.example.com/org/bases.git": remoteBase}}
	files := map[string]string{
		"app/kustomization.yaml": "namePrefix: prod-\nresources:\n- https://git.example.com/org/bases.git//base?ref=v1\n",
	}
	objs, err := render(t, files, Options{Paths: []string{"app"}, Revision: "0123456789abcdef",
		Kustomize: KustomizeOptions{AllowRemote: true}, Remote: remotes})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var configMap string
	for _, o := range objs {
		got = append(got, o.Origin.String()+": "+ref(o.decoded()))
		if o.decoded().GetKind() == "ConfigMap" {
			configMap = o.decoded().GetName()
		}
	}
	want := []string{
		"app/kustomization.yaml → https://git.example.com/org/bases.git//base/deployment.yaml?ref=v1: Deployment/default/prod-web",
		"app/kustomization.yaml → https://git.example.com/org/bases.git//base/kustomization.yaml?ref=v1: ConfigMap/default/" + configMap,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(configMap, "prod-web-config-") {
		t.Errorf("ConfigMap %q has no prefix and hash suffix", configMap)
	}
	var deployEnv string
	for _, o := range objs {
		if o.decoded().GetKind() == "Deployment" {
			c := o.decoded().Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			deployEnv = c["envFrom"].([]any)[0].(map[string]any)["configMapRef"].(map[string]any)["name"].(string)
		}
	}
	if deployEnv != configMap {
		t.Errorf("the Deployment takes its environment from %q, want the hashed %q", deployEnv, configMap)
	}
	if diff := cmp.Diff([]RemoteBase{{Repo: "https://git.example.com/org/bases.git", Ref: "v1"}}, remotes.fetched); diff != "" {
		t.Errorf("fetched (-want +got):\n%s", diff)
	}
}

func TestRenderRemoteBaseErrors(t *testing.T) {
	tests := []struct {
		name     string
		resource string
		want     string
	}{{
		name:     "an unreachable repository names the kustomization and the base, without the token",
		resource: "https://token1234@git.example.com/org/gone.git//base?ref=v1",
		want:     `app/kustomization.yaml: resources entry "https://***@git.example.com/org/gone.git//base?ref=v1" cannot be fetched: fetch failed: connection refused`,
	}, {
		name:     "a path the repository does not have",
		resource: "https://git.example.com/org/bases.git//nothing?ref=v1",
		want:     `app/kustomization.yaml: resources entry "https://git.example.com/org/bases.git//nothing?ref=v1": path "nothing" is not in https://git.example.com/org/bases.git at fedcba9`,
	}, {
		name:     "a single file over HTTP",
		resource: "https://example.com/manifests/web.yaml",
		want:     `app/kustomization.yaml: resources entry "https://example.com/manifests/web.yaml": is a file fetched over HTTP; driftless fetches remote bases from git repositories only (REPO//PATH?ref=REF): copy the file into the repository`,
	}, {
		name:     "a remote base that leads out of its repository",
		resource: "https://git.example.com/org/bases.git//outside",
		want:     `https://git.example.com/org/bases.git//outside/kustomization.yaml: resources entry "../../secrets" leads out of`,
	}, {
		name:     "a remote base that names a remote base",
		resource: "https://git.example.com/org/bases.git//nested",
		want:     `https://git.example.com/org/bases.git//nested/kustomization.yaml: resources entry "https://git.example.com/org/other.git//base" is remote, in a remote base; driftless fetches remote bases named by the repository's own kustomizations only`,
	}, {
		name:     "a ref the repository does not have",
		resource: "https://git.example.com/org/bases.git//base?ref=v9",
		want:     `app/kustomization.yaml: resources entry "https://git.example.com/org/bases.git//base?ref=v9" cannot be fetched: ref "v9" is neither a tag nor a branch`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remotes := &fakeRemotes{t: t, repos: map[string]map[string]string{"https://git.example.com/org/bases.git": remoteBase}}
			files := map[string]string{"app/kustomization.yaml": "resources:\n- " + tt.resource + "\n"}
			objs, err := render(t, files, Options{Paths: []string{"app"}, Revision: "0123456789abcdef",
				Kustomize: KustomizeOptions{AllowRemote: true}, Remote: remotes})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to contain %s", err, tt.want)
			}
			if len(objs) > 0 {
				t.Errorf("%d objects rendered despite the error", len(objs))
			}
			if strings.Contains(err.Error(), "token1234") {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
}

func TestRemoteEntryErrorsDoNotShowAToken(t *testing.T) {
	remotes := func() *fakeRemotes {
		return &fakeRemotes{t: t, repos: map[string]map[string]string{"https://git.example.com/org/bases.git": {
			"nested/kustomization.yaml": "resources:\n- https://u:tok-secret-9@git.example.com/org/other.git//base\n",
		}}}
	}
	tests := []struct {
		name    string
		files   string
		options Options
		want    string
	}{{
		name:    "allowRemote is off",
		files:   "resources:\n- https://u:tok-secret-9@git.example.com/org/r//p\n",
		options: Options{Remote: remotes()},
		want:    `resources entry "https://***@git.example.com/org/r//p" is remote; remote bases and resources are refused`,
	}, {
		name:    "a remote file that is not a base",
		files:   "resources: []\npatches:\n- path: https://u:tok-secret-9@git.example.com/org/r//patch.yaml\n",
		options: Options{Kustomize: KustomizeOptions{AllowRemote: true}, Remote: remotes()},
		want:    `path entry "https://***@git.example.com/org/r//patch.yaml" is remote; driftless fetches remote bases of git form in resources and components only`,
	}, {
		name:    "an entry that does not parse",
		files:   "resources:\n- https://u:tok-secret-9@git.example.com/org/r//p?foo=1\n",
		options: Options{Kustomize: KustomizeOptions{AllowRemote: true}, Remote: remotes()},
		want:    `resources entry "https://***@git.example.com/org/r//p?foo=1": query parameter "foo"`,
	}, {
		name:    "remote bases are not fetched here",
		files:   "resources:\n- https://u:tok-secret-9@git.example.com/org/r//p\n",
		options: Options{Kustomize: KustomizeOptions{AllowRemote: true}},
		want:    `resources entry "https://***@git.example.com/org/r//p" is remote, and remote bases are not fetched here`,
	}, {
		name:    "a remote base that names a remote base",
		files:   "resources:\n- https://git.example.com/org/bases.git//nested\n",
		options: Options{Kustomize: KustomizeOptions{AllowRemote: true}, Remote: remotes()},
		want:    `resources entry "https://***@git.example.com/org/other.git//base" is remote, in a remote base`,
	}, {
		name:    "a password with an @ of its own",
		files:   "resources:\n- https://u:tok@secret-9@git.example.com/org/r//p\n",
		options: Options{Remote: remotes()},
		want:    `resources entry "https://***@git.example.com/org/r//p" is remote`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.options.Paths = []string{"app"}
			_, err := render(t, map[string]string{"app/kustomization.yaml": tt.files}, tt.options)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to contain %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret-9") {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
}

func TestRenderRefusesRemoteFilesOtherThanBasesWithAllowRemote(t *testing.T) {
	remotes := &fakeRemotes{t: t}
	files := map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\npatches:\n- path: https://git.example.com/org/bases.git//patch.yaml\n",
		"app/cm.yaml":            configMap("a"),
	}
	_, err := render(t, files, Options{Paths: []string{"app"}, Kustomize: KustomizeOptions{AllowRemote: true}, Remote: remotes})
	want := `app/kustomization.yaml: path entry "https://git.example.com/org/bases.git//patch.yaml" is remote; driftless fetches remote bases of git form in resources and components only`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want %s", err, want)
	}
	if len(remotes.fetched) > 0 {
		t.Errorf("fetched %v", remotes.fetched)
	}
}

func TestParseRemote(t *testing.T) {
	tests := []struct {
		entry string
		want  RemoteBase
	}{
		{"https://host/org/repo//apps/base?ref=v1.2", RemoteBase{Repo: "https://host/org/repo", Path: "apps/base", Ref: "v1.2"}},
		{"ssh://git@host/org/repo.git//base?ref=main", RemoteBase{Repo: "ssh://git@host/org/repo.git", Path: "base", Ref: "main"}},
		{"git@host:org/repo.git//base?version=v1", RemoteBase{Repo: "git@host:org/repo.git", Path: "base", Ref: "v1"}},
		{"https://host/org/repo.git/base?ref=v1", RemoteBase{Repo: "https://host/org/repo.git", Path: "base", Ref: "v1"}},
		{"file:///srv/git/bases.git//base", RemoteBase{Repo: "file:///srv/git/bases.git", Path: "base"}},
		{"github.com/org/repo//base?ref=v1", RemoteBase{Repo: "https://github.com/org/repo", Path: "base", Ref: "v1"}},
		{"git::https://host/org/repo.git?ref=main", RemoteBase{Repo: "https://host/org/repo.git", Ref: "main"}},
	}
	for _, tt := range tests {
		got, err := parseRemote(tt.entry)
		if err != nil || got != tt.want {
			t.Errorf("parseRemote(%q) = %+v, %v; want %+v", tt.entry, got, err, tt.want)
		}
	}
}
