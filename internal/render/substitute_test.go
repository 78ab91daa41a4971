package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {version: "${version}"}
spec:
  replicas: ${replicas}
  paused: ${paused:=false}
  template:
    spec:
      containers:
      - name: web
        image: registry.example.com/web:${tag}
        args: ["--workers=${workers:=4}", "${workers:=4}"]
        env:
        - {name: PORT, value: "${port}"}
        - {name: SHELL_HOME, value: "$${HOME}/bin"}
        - {name: REGION, value: "${region:=eu-west-1} ${cluster}"}
`

func TestRenderSubstitutesVariables(t *testing.T) {
	vars := map[string]Variable{
		"version": {Value: "7"}, "replicas": {Value: "3"}, "tag": {Value: "1.4.2"},
		"port": {Value: "8080"}, "cluster": {Value: "blue"}, "password": {Value: "s3cret", Secret: true},
	}
	objs, err := render(t, map[string]string{"web.yaml": deployment}, Options{Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	u := objs[0].decoded().Object
	container := u["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	tests := []struct {
		name      string
		got, want any
	}{
		{"a whole-scalar integer becomes a number, as in YAML", u["spec"].(map[string]any)["replicas"], int64(3)},
		{"a default is used when the variable is not defined", u["spec"].(map[string]any)["paused"], false},
		{"a label stays a string even when its value is a number", u["metadata"].(map[string]any)["labels"], map[string]any{"version": "7"}},
		{"a variable inside a string is replaced", container.(map[string]any)["image"], "registry.example.com/web:1.4.2"},
		{"args stay strings", container.(map[string]any)["args"], []any{"--workers=4", "4"}},
		{"env values stay strings, $${ is a literal ${, several variables in one string", container.(map[string]any)["env"], []any{
			map[string]any{"name": "PORT", "value": "8080"},
			map[string]any{"name": "SHELL_HOME", "value": "${HOME}/bin"},
			map[string]any{"name": "REGION", "value": "eu-west-1 blue"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if len(objs[0].SecretVariables) != 0 {
		t.Errorf("SecretVariables = %v, want none: no Secret value was used", objs[0].SecretVariables)
	}
}

func TestRenderSubstitutesKustomizeOutputAndNamespaces(t *testing.T) {
	files := map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\nnamePrefix: ${env}-\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: ${team}\ndata:\n  password: ${password}\n  url: https://${host:=example.com}\n",
	}
	vars := map[string]Variable{"team": {Value: "shop"}, "env": {Value: "prod"}, "password": {Value: "s3cret", Secret: true}}
	objs, err := render(t, files, Options{Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{"ref": ref(objs[0].decoded()), "data": objs[0].decoded().Object["data"], "secrets": objs[0].SecretVariables}
	want := map[string]any{
		"ref":     "ConfigMap/shop/prod-settings",
		"data":    map[string]any{"password": "s3cret", "url": "https://example.com"},
		"secrets": []string{"password"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRenderLeavesObjectsAlone(t *testing.T) {
	tests := []struct {
		name string
		file string
		vars map[string]Variable
	}{
		{"an object annotated driftless.dev/substitute: disabled",
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: script\n  annotations: {driftless.dev/substitute: disabled}\ndata:\n  run.sh: echo ${HOME}\n",
			map[string]Variable{"HOME": {Value: "/root"}}},
		{"every object when the Sync defines no variables",
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: script\ndata:\n  run.sh: echo ${HOME}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, map[string]string{"s.yaml": tt.file}, Options{Variables: tt.vars})
			if err != nil {
				t.Fatal(err)
			}
			if got := objs[0].decoded().Object["data"].(map[string]any)["run.sh"]; got != "echo ${HOME}" {
				t.Errorf("run.sh = %q, want it unchanged", got)
			}
		})
	}
}

func TestRenderSubstitutionErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"an undefined variable names the file, the object, the field and the variable",
			map[string]string{"apps/web.yaml": configMap("a") + "---\n" + configMap("web") + "data:\n  url: https://${host}/\n"},
			[]string{"apps/web.yaml:6 (document 1): ConfigMap/web: data.url: variable host is not defined; define it in the Sync's spec.substitute or in a ConfigMap or Secret of spec.substituteFrom, give a default with ${host:=value}, or write $${host} for a literal ${host}"}},
		{"an undefined variable in a kustomization's output names the kustomization and the resource file",
			map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": configMap("web") + "data:\n  x: ${missing}\n"},
			[]string{"app/kustomization.yaml → app/cm.yaml: ConfigMap/web: data.x: variable missing is not defined; define it in the Sync's spec.substitute or in a ConfigMap or Secret of spec.substituteFrom, give a default with ${missing:=value}, or write $${missing} for a literal ${missing}"}},
		{"a reference that is not a variable name",
			map[string]string{"a.yaml": configMap("a") + "data:\n  x: ${a-b}\n"},
			[]string{"a.yaml:1 (document 0): ConfigMap/a: data.x: ${a-b} is not a variable reference driftless understands; write ${name} or ${name:=default} (names match ^[_a-zA-Z][_a-zA-Z0-9]*$), or $${ for a literal ${"}},
		{"a ${ that is never closed",
			map[string]string{"a.yaml": configMap("a") + "data:\n  x: ab${c\n"},
			[]string{`a.yaml:1 (document 0): ConfigMap/a: data.x: "ab${c" has a ${ without a closing }; write ${name} or ${name:=default}, or $${ for a literal ${`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]Variable{"password": {Value: "s3cret", Secret: true}}
			objs, err := render(t, tt.files, Options{Variables: vars})
			if objs != nil {
				t.Errorf("got %d objects, want none", len(objs))
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderRefusesANameThatSubstitutionEmptied(t *testing.T) {
	_, err := render(t, map[string]string{"a.yaml": configMap("${name:=}")}, Options{Variables: map[string]Variable{}})
	want := []string{"a.yaml:1 (document 0): ConfigMap/${name:=}: metadata.name is empty after substitution; give the variable a value or the reference a default"}
	if diff := cmp.Diff(want, messages(err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestASecretValueIsNeverTypedAndALabelStaysAString(t *testing.T) {
	vars := map[string]Variable{"pin": {Value: "1234", Secret: true}, "v": {Value: "2"}}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "t"},
		"spec": map[string]any{
			"pin":      "${pin}",
			"replicas": "${v}",
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"version": "${v}"}}},
			"selector": map[string]any{"matchLabels": map[string]any{"version": "${v}"}},
		},
	}}
	secrets, err := substitute(u, vars)
	if err != nil {
		t.Fatal(err)
	}
	spec := u.Object["spec"].(map[string]any)
	if got := spec["pin"]; got != "1234" {
		t.Errorf("a Secret's value became %#v, want the string \"1234\" (a number would escape masking)", got)
	}
	if got := spec["replicas"]; got != int64(2) {
		t.Errorf("replicas = %#v, want the number 2", got)
	}
	if got := spec["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["version"]; got != "2" {
		t.Errorf("a pod template label = %#v, want the string \"2\"", got)
	}
	if got := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)["version"]; got != "2" {
		t.Errorf("a selector label = %#v, want the string \"2\"", got)
	}
	if len(secrets) != 1 || secrets[0] != "pin" {
		t.Errorf("secret variables used = %v, want [pin]", secrets)
	}
}

func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{"${a}", "x${a:=1}y", "$${a}", "${", "${a-b}", "$$${a}", "${a:=${b}}", "}${a}{"} {
		f.Add(s)
	}
	vars := map[string]Variable{"a": {Value: "A"}, "b": {Value: "B", Secret: true}}
	f.Fuzz(func(t *testing.T, text string) {
		s := substitution{vars: vars}
		out, _, err := s.expand(text)
		if err != nil {
			if strings.Contains(err.Error(), "B") && !strings.Contains(text, "B") {
				t.Errorf("error %q shows a Secret value", err)
			}
			return
		}
		if !strings.Contains(text, "${") && out != text {
			t.Errorf("expand(%q) = %q, want it unchanged: it holds no reference", text, out)
		}
	})
}
