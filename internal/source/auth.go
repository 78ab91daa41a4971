package source

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Credentials are what a Sync's git Secret holds. The keys of the Secret
// are "identity" (an SSH private key), "known_hosts", "username",
// "password" and "token".
type Credentials struct {
	Identity   []byte
	KnownHosts []byte
	Username   string
	Password   string
	Token      string
	// InsecureSkipHostKeyCheck accepts any SSH host key.
	InsecureSkipHostKeyCheck bool
}

// CredentialsFromSecret reads Credentials from a Secret's data.
func CredentialsFromSecret(data map[string][]byte) Credentials {
	return Credentials{
		Identity:   data["identity"],
		KnownHosts: data["known_hosts"],
		Username:   string(data["username"]),
		Password:   string(data["password"]),
		Token:      string(data["token"]),
	}
}

// ErrNoKnownHosts means an SSH source has no known_hosts to verify the
// server against.
var ErrNoKnownHosts = errors.New("no known_hosts for the SSH server")

// authMethod returns the go-git auth for url, or nil for none.
func (c Credentials) authMethod(url string) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("parse repository URL %s: %w", Redact(url), err)
	}
	switch ep.Protocol {
	case "ssh":
		user := ep.User
		if user == "" {
			user = "git"
		}
		var auth *gitssh.PublicKeys
		if len(c.Identity) > 0 {
			signer, err := ssh.ParsePrivateKey(c.Identity)
			if err != nil {
				return nil, errors.New("the identity in the git Secret is not a valid unencrypted SSH private key")
			}
			auth = &gitssh.PublicKeys{User: user, Signer: signer}
		} else {
			return nil, errors.New("an SSH repository needs a deploy key: set spec.source.git.secretRef to a Secret with an identity key")
		}
		cb, err := c.hostKeyCallback()
		if err != nil {
			return nil, err
		}
		auth.HostKeyCallback = cb
		return auth, nil
	case "http", "https":
		switch {
		case c.Token != "":
			user := c.Username
			if user == "" {
				user = "git"
			}
			return &githttp.BasicAuth{Username: user, Password: c.Token}, nil
		case c.Username != "" || c.Password != "":
			return &githttp.BasicAuth{Username: c.Username, Password: c.Password}, nil
		}
		return nil, nil
	default:
		return nil, nil
	}
}

func (c Credentials) hostKeyCallback() (ssh.HostKeyCallback, error) {
	if c.InsecureSkipHostKeyCheck {
		return ssh.InsecureIgnoreHostKey(), nil //nolint:gosec // the Sync explicitly asked for it
	}
	if len(bytes.TrimSpace(c.KnownHosts)) == 0 {
		return nil, fmt.Errorf("%w: add a known_hosts key to the git Secret (ssh-keyscan <host>), "+
			"or set spec.source.git.insecureSkipHostKeyCheck: true to accept any host key", ErrNoKnownHosts)
	}
	return knownHostsCallback(c.KnownHosts)
}

// knownHostsCallback verifies host keys against known_hosts content,
// plain or hashed, and explains a refusal in words a user can act on.
func knownHostsCallback(data []byte) (ssh.HostKeyCallback, error) {
	f, err := os.CreateTemp("", "driftless-known-hosts-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, err
	}
	cb, err := knownhosts.New(f.Name()) // reads the file now
	if err != nil {
		return nil, fmt.Errorf("known_hosts in the git Secret is invalid: %w", err)
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		var keyErr *knownhosts.KeyError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &keyErr) && len(keyErr.Want) > 0:
			return fmt.Errorf("host key of %s does not match known_hosts (server offered %s %s): refusing to connect; "+
				"if the server's key really changed, update known_hosts in the git Secret",
				hostname, key.Type(), ssh.FingerprintSHA256(key))
		case errors.As(err, &keyErr):
			return fmt.Errorf("host %s is not in known_hosts (its key is %s %s): add it to known_hosts in the git Secret",
				hostname, key.Type(), ssh.FingerprintSHA256(key))
		}
		return err
	}, nil
}
