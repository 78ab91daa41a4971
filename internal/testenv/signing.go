package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// SigningKey is a key git signs commits and tags with: an ed25519 SSH key
// made by ssh-keygen, or an OpenPGP key in its own GnuPG home.
type SigningKey struct {
	// AllowedSigner is, for an SSH key, its line for an allowed_signers
	// file.
	AllowedSigner string
	// ArmoredPublic is, for an OpenPGP key, its armored public key.
	ArmoredPublic string
	// ID is what a verifier reports as the signer: the SHA256:…
	// fingerprint of an SSH key, the 16-digit key ID of an OpenPGP key.
	ID string
	// Path is the file of an SSH private key (its public key is Path.pub).
	Path   string
	config []string // git -c options that sign with the key
	env    []string
}

// NewSSHSigningKey makes an ed25519 key with ssh-keygen.
func NewSSHSigningKey(t testing.TB) *SigningKey {
	t.Helper()
	path := filepath.Join(t.TempDir(), "signing")
	run(t, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test@driftless.dev", "-f", path)
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(run(t, nil, "ssh-keygen", "-l", "-E", "sha256", "-f", path+".pub"))
	return &SigningKey{
		AllowedSigner: "test@driftless.dev " + strings.TrimSpace(string(pub)),
		ID:            fields[1],
		Path:          path,
		config:        []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + path + ".pub"},
	}
}

// NewGPGSigningKey makes an ed25519 OpenPGP key in a GnuPG home of its
// own, whose agent is stopped at the end of the test. When gpg is not
// installed it skips the test, or fails it under CI=true (MissingTool).
func NewGPGSigningKey(t testing.TB) *SigningKey {
	t.Helper()
	_, env := gpgHome(t, "OpenPGP signatures are not tested")
	run(t, env, "gpg", "--batch", "--quiet", "--passphrase", "", "--quick-gen-key", "driftless test <test@driftless.dev>", "ed25519", "sign", "never")
	var fpr string
	for _, line := range strings.Split(run(t, env, "gpg", "--batch", "--with-colons", "--list-keys"), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && fpr == "" {
			fpr = f[9]
		}
	}
	return &SigningKey{
		ArmoredPublic: run(t, env, "gpg", "--batch", "--armor", "--export", fpr),
		ID:            fpr[len(fpr)-16:],
		config:        []string{"-c", "gpg.format=openpgp", "-c", "gpg.program=gpg", "-c", "user.signingkey=" + fpr},
		env:           env,
	}
}

// ArmoredPrivate exports the private part of an OpenPGP key, for tests
// that check it is refused where only public keys belong.
func (k *SigningKey) ArmoredPrivate(t testing.TB) string {
	t.Helper()
	return run(t, k.env, "gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--armor", "--export-secret-keys", k.ID)
}

// SignedCommit is Commit with the commit signed by key.
func (r *Repo) SignedCommit(t testing.TB, key *SigningKey, message string, files map[string]string) string {
	t.Helper()
	return r.commit(t, key, message, files)
}

// SignedTag creates an annotated tag at HEAD signed by key, or, with a nil
// key, an unsigned annotated tag, and pushes it.
func (r *Repo) SignedTag(t testing.TB, key *SigningKey, name string) {
	t.Helper()
	if key == nil {
		r.git(t, r.Work, "tag", "--annotate", "--message", "release "+name, name)
	} else {
		r.gitSigned(t, key, "tag", "--sign", "--message", "release "+name, name)
	}
	r.git(t, r.Work, "push", "--quiet", "--force", "origin", "refs/tags/"+name)
}

// gitSigned runs git in the working clone with the options that sign with key.
func (r *Repo) gitSigned(t testing.TB, key *SigningKey, args ...string) string {
	t.Helper()
	cmd := GitCommand(r.Work, append(append([]string{}, key.config...), args...)...)
	cmd.Env = append(cmd.Env, key.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// OpenPGPKey is an OpenPGP key made in process, for the agent to sign
// commits with (spec.imageUpdate.signingKey).
type OpenPGPKey struct {
	// ArmoredPrivate is the private key as gpg --armor
	// --export-secret-keys writes it; encrypted when made with a
	// passphrase.
	ArmoredPrivate string
	// ArmoredPublic is its public key, for a verification Secret.
	ArmoredPublic string
	// ID is the 16-digit key ID a verifier reports.
	ID string
}

// NewOpenPGPKey makes a key for name <email>, its private part protected
// by passphrase unless that is empty.
func NewOpenPGPKey(t testing.TB, name, email, passphrase string) *OpenPGPKey {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", email, &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var pub bytes.Buffer
	w, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Self-signatures are made while the key is still in the clear.
	var priv bytes.Buffer
	w, err = armor.Encode(&priv, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SerializePrivateWithoutSigning(w, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if passphrase != "" {
		if err := e.EncryptPrivateKeys([]byte(passphrase), nil); err != nil {
			t.Fatal(err)
		}
		priv.Reset()
		w, err = armor.Encode(&priv, openpgp.PrivateKeyType, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SerializePrivateWithoutSigning(w, nil); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	return &OpenPGPKey{ArmoredPrivate: priv.String(), ArmoredPublic: pub.String(), ID: e.PrimaryKey.KeyIdString()}
}
