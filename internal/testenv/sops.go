package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GPGKey is an OpenPGP key that gpg made in a GnuPG home of its own, with
// an encryption subkey: what a Flux v1 user encrypted SOPS files for.
type GPGKey struct {
	// Fingerprint is the primary key's fingerprint, as gpg prints it.
	Fingerprint string
	// Home is the key's GnuPG home, for GNUPGHOME: the sops CLI encrypts
	// for the key with it (sops encrypt --pgp Fingerprint).
	Home string
	// ArmoredPrivate is the key as gpg --export-secret-keys --armor
	// writes it: protected by the passphrase it was made with, if any.
	ArmoredPrivate string
}

// NewGPGEncryptionKey makes, with the real gpg, an ed25519 key with a
// cv25519 encryption subkey (gpg's future-default), protected by
// passphrase unless that is empty, in a GnuPG home whose agent is
// stopped at the end of the test. When gpg is not installed it skips the
// test, or fails it under CI=true (MissingTool).
func NewGPGEncryptionKey(t testing.TB, passphrase string) *GPGKey {
	t.Helper()
	home, env := gpgHome(t, "PGP-encrypted SOPS files are not tested")
	pass := []string{"--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", passphrase}
	run(t, env, "gpg", append(pass, "--quick-gen-key", "driftless sops test <sops@driftless.dev>", "future-default", "default", "never")...)
	var fpr string
	for _, line := range strings.Split(run(t, env, "gpg", "--batch", "--with-colons", "--list-secret-keys"), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && fpr == "" {
			fpr = f[9]
		}
	}
	return &GPGKey{
		Fingerprint:    fpr,
		Home:           home,
		ArmoredPrivate: run(t, env, "gpg", append(pass, "--armor", "--export-secret-keys", fpr)...) + "\n",
	}
}

// gpgHome makes a GnuPG home of its own, whose agent is stopped at the
// end of the test, and returns it and the environment that selects it.
// When gpg is not installed it skips the test, or fails it under CI=true
// (MissingTool); untested says what goes untested.
func gpgHome(t testing.TB, untested string) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		MissingTool(t, "gpg is not installed (Debian package gnupg): %s", untested)
	}
	// A short path: gpg-agent's socket lives in the home directory.
	home, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("gpgconf", "--homedir", home, "--kill", "all").Run()
		os.RemoveAll(home)
	})
	return home, []string{"GNUPGHOME=" + home}
}

// SopsCLI returns the reference sops CLI that `make sops` builds into
// bin/tools, or $DRIFTLESS_SOPS_BIN; when it is missing it skips the test,
// or fails it under CI=true (MissingTool).
func SopsCLI(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("DRIFTLESS_SOPS_BIN")
	if bin == "" {
		root, err := RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, "bin", "tools", "sops")
	}
	if _, err := os.Stat(bin); err != nil {
		MissingTool(t, "the sops CLI is not at %s: run make sops (or set DRIFTLESS_SOPS_BIN)", bin)
	}
	return bin
}

// SopsEncrypt encrypts plain, the content of a file called name, with
// the real sops CLI: `sops encrypt ARGS FILE`, with env added to the
// environment (GNUPGHOME, AWS_*), and returns what it prints.
func SopsEncrypt(t testing.TB, name, plain string, env []string, args ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(plain), 0o600); err != nil {
		t.Fatal(err)
	}
	return run(t, env, SopsCLI(t), append(append([]string{"encrypt"}, args...), file)...) + "\n"
}
