package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// newDeployKey makes an ed25519 key pair: the private key in OpenSSH PEM
// form (the Secret's "identity") and the public key in authorized_keys
// form, to add to the repository as a read-only deploy key.
func newDeployKey(comment string) (identity []byte, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	return pem.EncodeToMemory(block), authorizedKey(sshPub, comment), nil
}

// publicKeyOf is the authorized_keys line of a Secret's "identity".
func publicKeyOf(identity []byte, comment string) (string, error) {
	signer, err := ssh.ParsePrivateKey(identity)
	if err != nil {
		return "", fmt.Errorf("the identity is not an unencrypted SSH private key: %w", err)
	}
	return authorizedKey(signer.PublicKey(), comment), nil
}

func authorizedKey(k ssh.PublicKey, comment string) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " " + comment
}

// sshAddress is the host:port of an ssh:// or scp-like git URL.
func sshAddress(gitURL string) (string, error) {
	if strings.HasPrefix(gitURL, "ssh://") {
		u, err := url.Parse(gitURL)
		if err != nil || u.Hostname() == "" {
			return "", fmt.Errorf("--git-url: no host in the ssh:// URL")
		}
		port := u.Port()
		if port == "" {
			port = "22"
		}
		return net.JoinHostPort(u.Hostname(), port), nil
	}
	// scp-like: [user@]host:path
	before, _, _ := strings.Cut(gitURL, ":")
	if i := strings.LastIndex(before, "@"); i >= 0 {
		before = before[i+1:]
	}
	if before == "" {
		return "", fmt.Errorf("--git-url: no host in the scp-like address")
	}
	return net.JoinHostPort(before, "22"), nil
}

var errHostKeySeen = errors.New("host key seen")

// fetchHostKey asks the SSH server at addr for its host key, as ssh-keyscan
// does, and returns its known_hosts line and SHA256 fingerprint. It
// authenticates nothing: the user confirms the fingerprint.
func fetchHostKey(addr string, timeout time.Duration) (line, fingerprint string, err error) {
	var key ssh.PublicKey
	cfg := &ssh.ClientConfig{
		User: "git",
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			key = k
			return errHostKeySeen
		},
		Timeout: timeout,
	}
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", "", fmt.Errorf("fetch the SSH host key of %s: %w; check --git-url, or pass the host's key with --known-hosts FILE", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, _, _, err := ssh.NewClientConn(conn, addr, cfg); key == nil {
		return "", "", fmt.Errorf("fetch the SSH host key of %s: %w; pass the host's key with --known-hosts FILE", addr, err)
	}
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, key), ssh.FingerprintSHA256(key), nil
}

// knownHostsFingerprints lists "type SHA256:…" of every key of a
// known_hosts file, to print what the user trusts.
func knownHostsFingerprints(data []byte) []string {
	var out []string
	for rest := data; len(rest) > 0; {
		_, _, key, _, next, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			break
		}
		out = append(out, key.Type()+" "+ssh.FingerprintSHA256(key))
		rest = next
	}
	return out
}
