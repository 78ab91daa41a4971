package source

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// trust returns the Secret data that trusts keys: SSH keys in
// allowed_signers, OpenPGP keys as *.asc entries.
func trust(keys ...*testenv.SigningKey) map[string][]byte {
	data := map[string][]byte{}
	var signers []string
	for i, k := range keys {
		if k.AllowedSigner != "" {
			signers = append(signers, k.AllowedSigner)
		} else {
			data["key"+string(rune('a'+i))+".asc"] = []byte(k.ArmoredPublic)
		}
	}
	if len(signers) > 0 {
		data[AllowedSignersKey] = []byte("# team keys\n\n" + strings.Join(signers, "\n") + "\n")
	}
	return data
}

func verification(t *testing.T, mode VerifyMode, data map[string][]byte) *Verification {
	t.Helper()
	keys, err := ParseTrustedKeys("trusted-keys", data)
	if err != nil {
		t.Fatalf("parse trusted keys: %v", err)
	}
	return &Verification{Mode: mode, Keys: keys}
}

// checkout resolves and checks out req into a new directory; it returns
// the directory and the error.
func checkout(t *testing.T, req Request) (string, error) {
	t.Helper()
	rev, err := Resolve(context.Background(), req)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "checkout")
	_, err = Checkout(context.Background(), req, rev, dir)
	return dir, err
}

// verifyCase is one commit checked out with verification.
type verifyCase struct {
	name string
	// commit makes the commit to check out in repo.
	commit  func(t *testing.T, repo *testenv.Repo) string
	trusted map[string][]byte
	// wants are in the error; none means the checkout succeeds.
	wants []string
}

func TestCheckoutVerifiesSSHSignedCommits(t *testing.T) {
	sshKey, otherSSH := testenv.NewSSHSigningKey(t), testenv.NewSSHSigningKey(t)
	files := map[string]string{"app.yaml": "v: 1\n"}
	runVerifyCases(t, []verifyCase{
		{
			name:    "a commit signed by a trusted SSH key is checked out",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.SignedCommit(t, sshKey, "signed", files) },
			trusted: trust(otherSSH, sshKey),
		},
		{
			name:    "an unsigned commit is refused",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.Commit(t, "unsigned", files) },
			trusted: trust(sshKey),
			wants:   []string{"is not signed", "trusted-keys", "sign the commit with a trusted key"},
		},
		{
			name:    "a commit signed by an SSH key not in allowed_signers is refused, naming the key's fingerprint",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.SignedCommit(t, otherSSH, "signed", files) },
			trusted: trust(sshKey),
			wants:   []string{"is signed by SSH key " + otherSSH.ID, "not trusted", "add the key to trusted-keys/allowed_signers or sign the commit with a trusted key"},
		},
		{
			name: "an SSH-signed commit whose message was changed after signing is refused",
			commit: func(t *testing.T, r *testenv.Repo) string {
				return tamper(t, r, r.SignedCommit(t, sshKey, "deploy v1", files), "deploy v1", "deploy v666")
			},
			trusted: trust(sshKey),
			wants:   []string{"signature by SSH key " + sshKey.ID, "does not match its content"},
		},
		{
			name:    "a key that allowed_signers trusts only for other namespaces is refused",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.SignedCommit(t, sshKey, "signed", files) },
			trusted: map[string][]byte{AllowedSignersKey: []byte(withOptions(sshKey, `namespaces="file,email"`))},
			wants:   []string{"allows only for other namespaces (line 1)", "namespaces="},
		},
		{
			name:    "a key that allowed_signers trusts for git among other namespaces is trusted",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.SignedCommit(t, sshKey, "signed", files) },
			trusted: map[string][]byte{AllowedSignersKey: []byte(withOptions(sshKey, `namespaces="file,g*"`))},
		},
		{
			name:    "quoted principals are read",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.SignedCommit(t, sshKey, "signed", files) },
			trusted: map[string][]byte{AllowedSignersKey: []byte(`"a@example.com,b@example.com" ` + strings.SplitN(sshKey.AllowedSigner, " ", 2)[1] + "\n")},
		},
	})
}

func TestCheckoutVerifiesOpenPGPSignedCommits(t *testing.T) {
	gpgKey, otherGPG, sshKey := testenv.NewGPGSigningKey(t), testenv.NewGPGSigningKey(t), testenv.NewSSHSigningKey(t)
	files := map[string]string{"app.yaml": "v: 1\n"}
	runVerifyCases(t, []verifyCase{
		{
			name:    "a commit signed by a trusted OpenPGP key is checked out",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.SignedCommit(t, gpgKey, "signed", files) },
			trusted: trust(sshKey, otherGPG, gpgKey),
		},
		{
			name:    "a commit signed by an unknown OpenPGP key is refused, naming the key ID",
			commit:  func(t *testing.T, r *testenv.Repo) string { return r.SignedCommit(t, otherGPG, "signed", files) },
			trusted: trust(sshKey, gpgKey),
			wants:   []string{"is signed by OpenPGP key " + otherGPG.ID, "not trusted", "*.asc"},
		},
		{
			name: "an OpenPGP-signed commit whose message was changed after signing is refused",
			commit: func(t *testing.T, r *testenv.Repo) string {
				return tamper(t, r, r.SignedCommit(t, gpgKey, "deploy v1", files), "deploy v1", "deploy v666")
			},
			trusted: trust(gpgKey),
			wants:   []string{"signature by OpenPGP key " + gpgKey.ID, "does not verify"},
		},
	})
}

func runVerifyCases(t *testing.T, cases []verifyCase) {
	srv := testenv.NewGitServer(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := srv.NewRepo(t, "fleet"+string(rune('a'+i)))
			rev := tc.commit(t, repo)
			dir, err := checkout(t, Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}, Verify: verification(t, VerifyHEAD, tc.trusted)})
			if len(tc.wants) == 0 {
				if err != nil {
					t.Fatalf("checkout refused: %v", err)
				}
				return
			}
			var ve *VerificationError
			if !errors.As(err, &ve) {
				t.Fatalf("checkout returned %v, want a VerificationError", err)
			}
			for _, w := range append(tc.wants, "commit "+Short(rev)) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, err)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the refused revision was written to %s", dir)
			}
		})
	}
}

func TestCheckoutVerifiesTheAnnotatedTag(t *testing.T) {
	srv := testenv.NewGitServer(t)
	sshKey, otherSSH := testenv.NewSSHSigningKey(t), testenv.NewSSHSigningKey(t)
	repo := srv.NewRepo(t, "fleet")
	rev := repo.Commit(t, "unsigned commit", map[string]string{"app.yaml": "v: 1\n"})
	repo.SignedTag(t, sshKey, "ssh-signed")
	repo.SignedTag(t, otherSSH, "signed-by-other")
	repo.SignedTag(t, nil, "unsigned")
	repo.Tag(t, "lightweight")

	cases := []struct {
		tag   string
		wants []string
	}{
		{tag: "ssh-signed"},
		{tag: "signed-by-other", wants: []string{"tag signed-by-other (commit " + Short(rev) + ") is signed by SSH key " + otherSSH.ID, "sign the tag with a trusted key"}},
		{tag: "unsigned", wants: []string{"tag unsigned (commit " + Short(rev) + ") is not signed"}},
		{tag: "lightweight", wants: []string{"tag lightweight is a lightweight tag, which cannot be signed", "git tag -s lightweight"}},
	}
	for _, tc := range cases {
		name := "tag " + tc.tag + " is checked out"
		if len(tc.wants) > 0 {
			name = "tag " + tc.tag + " is refused"
		}
		t.Run(name, func(t *testing.T) {
			req := Request{URL: repo.FileURL(), Ref: Ref{Tag: tc.tag}, Verify: verification(t, VerifyTag, trust(sshKey))}
			_, err := checkout(t, req)
			if len(tc.wants) == 0 {
				if err != nil {
					t.Fatalf("checkout refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkout succeeded, want a refusal")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, err)
				}
			}
		})
	}
}

func TestCheckoutVerifiesAnOpenPGPSignedTag(t *testing.T) {
	gpgKey := testenv.NewGPGSigningKey(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "unsigned commit", map[string]string{"app.yaml": "v: 1\n"})
	repo.SignedTag(t, gpgKey, "v1")
	req := Request{URL: repo.FileURL(), Ref: Ref{Tag: "v1"}, Verify: verification(t, VerifyTag, trust(gpgKey))}
	if _, err := checkout(t, req); err != nil {
		t.Fatalf("checkout of a tag signed by a trusted OpenPGP key refused: %v", err)
	}
}

func TestCheckoutVerifiesARevisionAlreadyInTheDirectory(t *testing.T) {
	// A checkout made before verification was turned on is not trusted
	// because it is there.
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "unsigned", map[string]string{"app.yaml": "v: 1\n"})
	req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
	rev, err := Resolve(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "checkout")
	if _, err := Checkout(context.Background(), req, rev, dir); err != nil {
		t.Fatal(err)
	}
	req.Verify = verification(t, VerifyHEAD, trust(testenv.NewSSHSigningKey(t)))
	if _, err := Checkout(context.Background(), req, rev, dir); err == nil || !strings.Contains(err.Error(), "is not signed") {
		t.Fatalf("checkout of the unsigned revision already in place returned %v, want a refusal", err)
	}
}

func TestSSHSignatureForAnotherNamespaceIsRefused(t *testing.T) {
	key := testenv.NewSSHSigningKey(t)
	keys, err := ParseTrustedKeys("trusted-keys", trust(key))
	if err != nil {
		t.Fatal(err)
	}
	message := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\ndeploy\n")
	for _, ns := range []string{"git", "file"} {
		sig := sshSign(t, key, ns, message)
		err := keys.check("commit 1a2b3c4", "commit", sig, message)
		switch {
		case ns == "git" && err != nil:
			t.Errorf("signature in namespace git refused: %v", err)
		case ns == "file" && (err == nil || !strings.Contains(err.Error(), `in namespace "file", not "git"`)):
			t.Errorf("signature in namespace file: got %v, want a refusal naming the namespace", err)
		}
	}
}

func TestParseTrustedKeysRefusesWhatItCannotHonour(t *testing.T) {
	key := testenv.NewSSHSigningKey(t)
	secretPart := "AAAAC3NzaC1lZDI1NTE5AAAAIBROKEN"
	cases := []struct {
		name  string
		data  map[string][]byte
		wants []string
	}{
		{
			name:  "a Secret without any key is refused",
			data:  map[string][]byte{"identity": []byte("x")},
			wants: []string{"trusted keys Secret trusted-keys holds no key", "allowed_signers", "*.asc"},
		},
		{
			name:  "an allowed_signers with only comments is refused",
			data:  map[string][]byte{AllowedSignersKey: []byte("# nobody yet\n\n")},
			wants: []string{"holds no key"},
		},
		{
			name:  "a malformed line is named by number, without its content",
			data:  map[string][]byte{AllowedSignersKey: []byte(key.AllowedSigner + "\n# c\nme@example.com ssh-ed25519 " + secretPart + "\n")},
			wants: []string{"allowed_signers line 3: no valid public key"},
		},
		{
			name:  "a certificate authority is refused rather than trusted as a plain key",
			data:  map[string][]byte{AllowedSignersKey: []byte(withOptions(key, "cert-authority"))},
			wants: []string{"line 1: option cert-authority is not supported"},
		},
		{
			name:  "a validity window is refused rather than ignored",
			data:  map[string][]byte{AllowedSignersKey: []byte(withOptions(key, `valid-before="20300101"`))},
			wants: []string{"line 1: option valid-before is not supported"},
		},
		{
			name:  "an .asc entry that is no OpenPGP key is refused by name",
			data:  map[string][]byte{"team.asc": []byte(secretPart)},
			wants: []string{"team.asc is not an armored OpenPGP public key"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTrustedKeys("trusted-keys", tc.data)
			var ve *VerificationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want a VerificationError", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, err)
				}
			}
			if strings.Contains(err.Error(), secretPart) {
				t.Errorf("error quotes the Secret's content:\n%s", err)
			}
		})
	}
}

func TestParseTrustedKeysRefusesAPrivateOpenPGPKey(t *testing.T) {
	key := testenv.NewGPGSigningKey(t)
	_, err := ParseTrustedKeys("trusted-keys", map[string][]byte{"leaked.asc": []byte(key.ArmoredPrivate(t))})
	if err == nil || !strings.Contains(err.Error(), "leaked.asc holds a private key") {
		t.Fatalf("got %v, want a refusal naming the entry", err)
	}
}

// withOptions returns key's allowed_signers line with options between
// the principals and the key.
func withOptions(key *testenv.SigningKey, options string) string {
	principal, rest, _ := strings.Cut(key.AllowedSigner, " ")
	return principal + " " + options + " " + rest + "\n"
}

// tamper rewrites the message of commit rev from old to new, keeping its
// signature, makes the result the tip of main and returns its hash.
func tamper(t *testing.T, repo *testenv.Repo, rev, old, new string) string {
	t.Helper()
	raw, err := testenv.GitCommand(repo.Work, "cat-file", "commit", rev).Output()
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(raw), "\n\n"+old, "\n\n"+new, 1)
	if forged == string(raw) {
		t.Fatalf("message %q not found in commit %s", old, rev)
	}
	cmd := testenv.GitCommand(repo.Work, "hash-object", "-t", "commit", "-w", "--stdin")
	cmd.Stdin = strings.NewReader(forged)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.TrimSpace(string(out))
	if out, err := testenv.GitCommand(repo.Work, "push", "--quiet", "--force", "origin", hash+":refs/heads/main").CombinedOutput(); err != nil {
		t.Fatalf("push the forged commit: %v\n%s", err, out)
	}
	return hash
}

// sshSign signs message with ssh-keygen in namespace.
func sshSign(t testing.TB, key *testenv.SigningKey, namespace string, message []byte) string {
	t.Helper()
	cmd := exec.Command("ssh-keygen", "-q", "-Y", "sign", "-f", key.Path, "-n", namespace)
	cmd.Stdin = strings.NewReader(string(message))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v", err)
	}
	return string(out)
}

// TestMirrorVerifiesOpenPGPSignedCommitsAndTags goes through the agent's
// own path, Mirror.Checkout and its verify, with keys made by gpg: what a
// trusted key signed is served, anything else is refused.
func TestMirrorVerifiesOpenPGPSignedCommitsAndTags(t *testing.T) {
	gpgKey, otherGPG := testenv.NewGPGSigningKey(t), testenv.NewGPGSigningKey(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	m := &Mirror{Dir: t.TempDir()}
	head := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}, Verify: verification(t, VerifyHEAD, trust(gpgKey))}
	checkout := func(req Request) (string, Tree, error) {
		t.Helper()
		rev, err := m.Resolve(context.Background(), req)
		if err != nil {
			t.Fatalf("resolve: %v", err)
		}
		tr, err := m.Checkout(context.Background(), req, rev)
		return rev, tr, err
	}

	repo.SignedCommit(t, gpgKey, "v1", map[string]string{"app.yaml": "v: 1\n"})
	_, tr, err := checkout(head)
	if err != nil {
		t.Fatalf("a commit signed by a trusted OpenPGP key was refused: %v", err)
	}
	if got := readTreeFile(t, tr, "app.yaml"); got != "v: 1\n" {
		t.Errorf("app.yaml = %q, want v: 1", got)
	}
	tr.Release()

	for _, tc := range []struct {
		name   string
		commit func() string
		wants  []string
	}{
		{"an unsigned commit", func() string { return repo.Commit(t, "unsigned", map[string]string{"app.yaml": "v: 2\n"}) },
			[]string{"is not signed", "sign the commit with a trusted key"}},
		{"a commit signed by an OpenPGP key not trusted", func() string { return repo.SignedCommit(t, otherGPG, "other", map[string]string{"app.yaml": "v: 3\n"}) },
			[]string{"is signed by OpenPGP key " + otherGPG.ID, "not trusted"}},
	} {
		pushed := tc.commit()
		rev, _, err := checkout(head)
		if rev != pushed {
			t.Fatalf("%s: resolved %s, want %s", tc.name, Short(rev), Short(pushed))
		}
		var ve *VerificationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: checkout returned %v, want a VerificationError", tc.name, err)
		}
		for _, w := range append(tc.wants, "commit "+Short(rev)) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error lacks %q:\n%s", tc.name, w, err)
			}
		}
	}

	repo.SignedTag(t, gpgKey, "v1")
	repo.SignedTag(t, otherGPG, "v2")
	for tag, want := range map[string]string{"v1": "", "v2": "is signed by OpenPGP key " + otherGPG.ID} {
		_, tr, err := checkout(Request{URL: repo.FileURL(), Ref: Ref{Tag: tag}, Verify: verification(t, VerifyTag, trust(gpgKey))})
		switch {
		case want == "" && err != nil:
			t.Errorf("tag %s signed by a trusted OpenPGP key was refused: %v", tag, err)
		case want == "":
			tr.Release()
		case err == nil || !strings.Contains(err.Error(), want):
			t.Errorf("tag %s: checkout returned %v, want an error with %q", tag, err, want)
		}
	}
}
