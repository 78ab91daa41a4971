package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fage "filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
)

const secretMarker = "marker-s3cr3t-value"

// runSecret runs `driftless secret args...` and returns its output.
func runSecret(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewRootCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"secret"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestSecretKeygenEncryptDecryptAndEdit(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys", "age.txt")
	out, err := runSecret(t, "keygen", "--out", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	recipient := strings.TrimSpace(out)
	if !strings.HasPrefix(recipient, "age1") {
		t.Fatalf("keygen printed %q, want the recipient", out)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v, mode %v; want 0600", err, fi.Mode())
	}
	if _, err := runSecret(t, "keygen", "--out", keyFile); err == nil {
		t.Error("keygen overwrote an existing identity file")
	}
	t.Setenv("SOPS_AGE_KEY_FILE", keyFile)

	// A repository whose .sops.yaml sends apps/ to the recipient.
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "apps"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".sops.yaml"), []byte("creation_rules:\n- path_regex: ^apps/.*\\.yaml$\n  age: "+recipient+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(repo, "apps", "db.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+secretMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runSecret(t, "encrypt", "-i", file); err != nil {
		t.Fatal(err)
	}
	enc, _ := os.ReadFile(file)
	if bytes.Contains(enc, []byte(secretMarker)) || !bytes.Contains(enc, []byte("name: db")) || !bytes.Contains(enc, []byte(recipient)) {
		t.Fatalf("encrypt -i wrote\n%s\nwant only stringData encrypted, for the .sops.yaml recipient", enc)
	}
	out, err = runSecret(t, "decrypt", file)
	if err != nil || !strings.Contains(out, "password: "+secretMarker) {
		t.Fatalf("decrypt = %v\n%s", err, out)
	}

	// edit: the editor sees the plain file in a private temp file, which
	// is gone afterwards, and the result is encrypted again.
	seen := filepath.Join(dir, "seen")
	t.Setenv("EDITOR", `f() { cp "$1" `+seen+`; ls -l "$1" | cut -c1-10 >> `+seen+`.mode; echo "$1" > `+seen+`.path; sed -i s/`+secretMarker+`/rotated-value/ "$1"; }; f`)
	if _, err := runSecret(t, "edit", file); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(seen); !bytes.Contains(got, []byte(secretMarker)) {
		t.Errorf("the editor saw\n%s\nwant the decrypted file", got)
	}
	if mode, _ := os.ReadFile(seen + ".mode"); strings.TrimSpace(string(mode)) != "-rw-------" {
		t.Errorf("the temp file had mode %s, want -rw-------", mode)
	}
	tmp, _ := os.ReadFile(seen + ".path")
	if _, err := os.Stat(strings.TrimSpace(string(tmp))); !os.IsNotExist(err) {
		t.Errorf("the decrypted temp file %s is still there", tmp)
	}
	enc, _ = os.ReadFile(file)
	if bytes.Contains(enc, []byte("rotated-value")) {
		t.Fatalf("edit left the new value in plain text:\n%s", enc)
	}
	if out, _ := runSecret(t, "decrypt", file); !strings.Contains(out, "password: rotated-value") {
		t.Errorf("after edit, decrypt gives\n%s", out)
	}

	// A failing editor leaves the file alone and removes the temp file.
	t.Setenv("EDITOR", `f() { echo "$1" > `+seen+`.path; exit 3; }; f`)
	if _, err := runSecret(t, "edit", file); err == nil || !strings.Contains(err.Error(), "is unchanged") {
		t.Errorf("edit with a failing editor = %v, want it to say the file is unchanged", err)
	}
	tmp, _ = os.ReadFile(seen + ".path")
	if _, err := os.Stat(strings.TrimSpace(string(tmp))); !os.IsNotExist(err) {
		t.Errorf("the decrypted temp file %s is still there after a failed edit", tmp)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(after, enc) {
		t.Error("a failed edit changed the file")
	}
}

func TestDiffAgainstTheClusterMasksDecryptedValues(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	id, err := fage.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sops-age", Namespace: ns},
		Data:       map[string][]byte{"identity.agekey": []byte(id.String())},
	}); err != nil {
		t.Fatal(err)
	}
	encrypt := func(name, plain, regex string) string {
		enc, err := secrets.Encrypt(name, []byte(plain), secrets.Rule{Recipients: []string{id.Recipient().String()}, EncryptedRegex: regex})
		if err != nil {
			t.Fatal(err)
		}
		return string(enc)
	}
	// The cluster holds an older value of the ConfigMap.
	if err := cl.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Data:       map[string]string{"token": "old-" + secretMarker, "same": "same-" + secretMarker},
	}); err != nil {
		t.Fatal(err)
	}
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "initial", map[string]string{
		"apps/db.yaml":       encrypt("db.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+secretMarker+"\n", secrets.SecretFields),
		"apps/settings.yaml": encrypt("settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  token: new-"+secretMarker+"\n  same: same-"+secretMarker+"\n", "^data$"),
	})
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.FileURL(), Branch: "main"}},
			Paths:           []string{"apps"},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: ns,
			Decryption:      &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-age"}},
		},
	}
	if err := cl.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	r := runDiffCommand(t, "--sync", ns+"/fleet", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 1)
	for _, want := range []string{"+  password: '***'", "-  token: '***'\n+  token: '*** (changed)'", "  same: '***'"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, secretMarker) {
		t.Errorf("output shows a decrypted value:\n%s", r.out)
	}
}

func TestBuildOfflineDecryptsWithMyKeysAndMasksTheValues(t *testing.T) {
	id, err := fage.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	enc, err := secrets.Encrypt("cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  token: "+secretMarker+"\n"),
		secrets.Rule{Recipients: []string{id.Recipient().String()}, EncryptedRegex: "^data$"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), enc, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	t.Setenv("SOPS_AGE_KEY_FILE", filepath.Join(dir, "none"))
	if code := Execute([]string{"build", "--repo", dir}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "cannot be read") {
		t.Errorf("build with an unreadable key file: exit %d, stderr %s", code, errOut.String())
	}
	t.Setenv("SOPS_AGE_KEY_FILE", "")
	t.Setenv("SOPS_AGE_KEY", id.String())
	out.Reset()
	errOut.Reset()
	if code := Execute([]string{"build", "--repo", dir}, &out, &errOut); code != 0 {
		t.Fatalf("build: exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "token: '***'") || strings.Contains(out.String(), secretMarker) {
		t.Errorf("build printed\n%s\nwant the decrypted value masked", out.String())
	}
}
