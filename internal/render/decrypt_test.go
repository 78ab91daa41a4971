package render

import (
	"encoding/base64"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/driftless/driftless/internal/secrets"
)

const marker = "marker-s3cr3t-value"

// sopsKeys returns keys and a function that encrypts a file for them, as
// `driftless secret encrypt` does.
func sopsKeys(t *testing.T) (*secrets.Keys, func(name, plain string) string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.ParseKeys("test", map[string][]byte{"k.agekey": []byte(id.String())})
	if err != nil {
		t.Fatal(err)
	}
	return keys, func(name, plain string) string {
		rule, err := secrets.RuleFor(name, "", []string{id.Recipient().String()})
		if err != nil {
			t.Fatal(err)
		}
		enc, err := secrets.Encrypt(name, []byte(plain), rule)
		if err != nil {
			t.Fatal(err)
		}
		return string(enc)
	}
}

const dbSecret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + marker + "\n"

func TestRenderDecryptsEveryFileItReads(t *testing.T) {
	keys, encrypt := sopsKeys(t)
	objs, err := render(t, map[string]string{
		"plain/app.yaml":            configMap("app"),
		"plain/db.yaml":             encrypt("db.yaml", dbSecret),
		"kustom/kustomization.yaml": "resources: [api.yaml]\nsecretGenerator:\n- name: api-env\n  envs: [api.env]\n",
		"kustom/api.yaml":           encrypt("api.yaml", strings.Replace(dbSecret, "name: db", "name: api", 1)),
		"kustom/api.env":            encrypt("api.env", "TOKEN="+marker+"\n"),
		"other/kustomization.yaml":  "resources: [cm.yaml]\n",
		"other/cm.yaml":             configMap("other"),
	}, Options{Decrypt: keys})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Object{}
	for _, o := range objs {
		got[o.decoded().GetName()] = o
	}
	if v, _, _ := unstructuredString(got["db"], "stringData", "password"); v != marker {
		t.Errorf("Secret db from an encrypted manifest has password %q, want it decrypted", v)
	}
	if v, _, _ := unstructuredString(got["api"], "stringData", "password"); v != marker {
		t.Errorf("Secret api from an encrypted kustomize resource has password %q, want it decrypted", v)
	}
	var generated Object
	for name, o := range got {
		if strings.HasPrefix(name, "api-env-") {
			generated = o
		}
	}
	if generated.JSON == nil {
		t.Fatalf("no Secret generated from the encrypted env file; got %v", summarize(objs))
	}
	if v, _, _ := unstructuredString(generated, "data", "TOKEN"); v != base64.StdEncoding.EncodeToString([]byte(marker)) {
		t.Errorf("generated Secret has TOKEN %q, want the decrypted value", v)
	}
	for name, want := range map[string]bool{"app": false, "other": false, "db": true, "api": true, generated.decoded().GetName(): true} {
		if got[name].Decrypted != want {
			t.Errorf("%s: Decrypted = %v, want %v", name, got[name].Decrypted, want)
		}
	}
}

func unstructuredString(o Object, fields ...string) (string, bool, error) {
	if o.JSON == nil {
		return "", false, nil
	}
	v := any(o.decoded().Object)
	for _, f := range fields {
		m, _ := v.(map[string]any)
		v = m[f]
	}
	s, ok := v.(string)
	return s, ok, nil
}

func TestRenderRefusesEncryptedFilesItCannotDecrypt(t *testing.T) {
	keys, encrypt := sopsKeys(t)
	_, encryptOther := sopsKeys(t)
	good := encrypt("db.yaml", dbSecret)
	for _, tc := range []struct {
		name    string
		files   map[string]string
		decrypt Decryptor
		want    string
	}{
		{"without keys a manifest asks for spec.decryption", map[string]string{"db.yaml": good}, nil,
			"db.yaml: is encrypted with SOPS, and the Sync sets no spec.decryption"},
		{"without keys a kustomize input names the file", map[string]string{"k/kustomization.yaml": "secretGenerator:\n- name: s\n  envs: [s.env]\n", "k/s.env": encrypt("s.env", "A="+marker+"\n")}, nil,
			"file k/s.env is encrypted with SOPS, and the Sync sets no spec.decryption"},
		{"a file for another key names the file", map[string]string{"db.yaml": encryptOther("db.yaml", dbSecret)}, keys,
			"db.yaml: is encrypted for age recipients age1"},
		{"a tampered file names the file", map[string]string{"db.yaml": strings.Replace(good, "name: db", "name: dx", 1)}, keys,
			"db.yaml: failed its integrity check (MAC mismatch)"},
		{"a tampered kustomize resource names the file", map[string]string{"k/kustomization.yaml": "resources: [db.yaml]\n", "k/db.yaml": strings.Replace(good, "name: db", "name: dx", 1)}, keys,
			"file k/db.yaml failed its integrity check (MAC mismatch)"},
		{"a half-encrypted file names the file", map[string]string{"db.yaml": good[:strings.Index(good, "sops:")]}, keys,
			"db.yaml: is half-encrypted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"app.yaml": configMap("app")}
			for k, v := range tc.files {
				files[k] = v
			}
			objs, err := render(t, files, Options{Decrypt: tc.decrypt})
			if err == nil {
				t.Fatalf("render succeeded with %v", summarize(objs))
			}
			if objs != nil {
				t.Errorf("render returned objects %v with its error: nothing of the revision may be applied", summarize(objs))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n%s\ndoes not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("error shows the secret value: %s", err)
			}
		})
	}
}

// A chart takes its values from an encrypted values file, or from a
// Secret: any template may put such a value anywhere, so every object of
// the chart is masked like decrypted data; a chart with neither is not.
func TestChartObjectsFromSecretValuesAreMarkedDecrypted(t *testing.T) {
	keys, encrypt := sopsKeys(t)
	chart := map[string]string{
		"charts/web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  token: {{ .Values.token | quote }}\n",
		"values/secret.yaml":           encrypt("secret.yaml", "token: "+marker+"\n"),
		"apps/encrypted.yaml":          "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: encrypted}\nspec:\n  chart: {path: charts/web}\n  valuesFiles: [values/secret.yaml]\n",
		"apps/from-secret.yaml":        "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: from-secret}\nspec:\n  chart: {path: charts/web}\n  valuesFrom: [{kind: Secret, name: web-values}]\n",
		"apps/plain.yaml":              "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: plain}\nspec:\n  chart: {path: charts/web}\n  values: {token: public}\n",
	}
	objs, err := render(t, chart, Options{Paths: []string{"apps"}, Decrypt: keys,
		ValuesFrom: func(kind, name, key string) ([]byte, error) { return []byte("token: " + marker + "\n"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Object{}
	for _, o := range objs {
		got[o.decoded().GetName()] = o
	}
	for name, want := range map[string]bool{"encrypted": true, "from-secret": true, "plain": false} {
		if got[name].JSON == nil {
			t.Fatalf("no object %s; got %v", name, summarize(objs))
		}
		if got[name].Decrypted != want {
			t.Errorf("%s: Decrypted = %v, want %v", name, got[name].Decrypted, want)
		}
	}
	if v, _, _ := unstructuredString(got["encrypted"], "data", "token"); v != marker {
		t.Errorf("the encrypted values file was not decrypted: token %q", v)
	}
}
