package reliability

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
)

// corpusInputs is what some cases need beyond their files: the age keys
// their encrypted files are made for, and a chart repository.
type corpusInputs struct {
	// syncKey is in the Sync's key Secret; otherKey is not.
	syncKey, otherKey *age.X25519Identity
	chartRepo         string
}

// keySecretName is the Secret of the corpus Sync's spec.decryption.
const keySecretName = "corpus-age"

// newCorpusInputs makes the keys, puts the Sync's in a Secret of ns, and
// serves every chart of testdata/corpus/_charts from a loopback chart
// repository at the version of its Chart.yaml.
func newCorpusInputs(t *testing.T, ns string) *corpusInputs {
	t.Helper()
	in := &corpusInputs{}
	for _, k := range []**age.X25519Identity{&in.syncKey, &in.otherKey} {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		*k = id
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: keySecretName, Namespace: ns},
		Data:       map[string][]byte{"identity.agekey": []byte(in.syncKey.String() + "\n")},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	repo := testenv.NewChartRepo(t)
	in.chartRepo = repo.URL
	dirs, err := os.ReadDir(filepath.Join(corpusDir, "_charts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		files := readTree(t, filepath.Join(corpusDir, "_charts", d.Name()))
		var meta struct{ Version string }
		if err := yaml.Unmarshal([]byte(files["Chart.yaml"]), &meta); err != nil {
			t.Fatalf("_charts/%s/Chart.yaml: %v", d.Name(), err)
		}
		repo.Publish(d.Name(), meta.Version, packageChart(t, d.Name(), files))
	}
	return in
}

// files returns the files the case commits: its own, with the chart
// repository's address in place of chartRepoURL, and those it names
// encrypted.
func (in *corpusInputs) files(t *testing.T, cc corpusCase) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p, content := range cc.files {
		out[p] = strings.ReplaceAll(content, chartRepoURL, in.chartRepo)
	}
	for _, e := range cc.Encrypt {
		plain, ok := out[e.Path]
		if !ok {
			t.Fatalf("%s/case.yaml: encrypt names %s, which the case does not have", cc.Name, e.Path)
		}
		key := in.syncKey
		if e.For == "other" {
			key = in.otherKey
		}
		enc, err := secrets.Encrypt(e.Path, []byte(plain), secrets.Rule{
			Recipients:     []string{key.Recipient().String()},
			EncryptedRegex: secrets.SecretFields,
		})
		if err != nil {
			t.Fatalf("%s: encrypt %s: %v", cc.Name, e.Path, err)
		}
		if len(e.Tamper) == 2 {
			if !bytes.Contains(enc, []byte(e.Tamper[0])) {
				t.Fatalf("%s: the encrypted %s holds no %q to tamper with", cc.Name, e.Path, e.Tamper[0])
			}
			enc = bytes.Replace(enc, []byte(e.Tamper[0]), []byte(e.Tamper[1]), 1)
		}
		out[e.Path] = string(enc)
	}
	return out
}

// packageChart returns the archive (.tgz) of a chart made of files, as
// helm package writes it: every file under a directory named name.
func packageChart(t *testing.T, name string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	modTime := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		body := files[p]
		hdr := &tar.Header{Name: name + "/" + p, Mode: 0o644, Size: int64(len(body)), ModTime: modTime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
