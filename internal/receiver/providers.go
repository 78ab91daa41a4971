package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Provider endpoint names: /hooks/<name>, and the key of the webhook
// Secret that holds the provider's secret.
const (
	GitHub    = "github"
	GitLab    = "gitlab"
	Gitea     = "gitea"
	Bitbucket = "bitbucket"
	Generic   = "generic"
)

// SharedSecretKey is the key of the webhook Secret used by every provider
// whose own key is absent.
const SharedSecretKey = "token"

// provider says how one git provider signs, names and shapes its push
// notices.
type provider struct {
	// verify checks the request's signature or token against secret.
	verify func(h http.Header, body, secret []byte) error
	// eventHeaders hold the event type, first present wins; with none,
	// every request is a push.
	eventHeaders []string
	pushEvents   []string
	pingEvents   []string
	// deliveryHeaders hold the delivery ID, first present wins.
	deliveryHeaders []string
	parse           func(body []byte) (Push, error)
}

var providers = map[string]provider{
	GitHub: {
		verify:          verifyHMAC([]string{"X-Hub-Signature-256"}, "sha256="),
		eventHeaders:    []string{"X-GitHub-Event"},
		pushEvents:      []string{"push"},
		pingEvents:      []string{"ping"},
		deliveryHeaders: []string{"X-GitHub-Delivery"},
		parse:           parseGitHub,
	},
	GitLab: {
		verify:       verifyToken("X-Gitlab-Token"),
		eventHeaders: []string{"X-Gitlab-Event"},
		pushEvents:   []string{"Push Hook", "Tag Push Hook"},
		// Idempotency-Key stays the same when GitLab retries a delivery.
		deliveryHeaders: []string{"Idempotency-Key", "X-Gitlab-Event-UUID"},
		parse:           parseGitLab,
	},
	Gitea: {
		verify:          verifyHMAC([]string{"X-Forgejo-Signature", "X-Gitea-Signature"}, ""),
		eventHeaders:    []string{"X-Forgejo-Event", "X-Gitea-Event"},
		pushEvents:      []string{"push"},
		deliveryHeaders: []string{"X-Forgejo-Delivery", "X-Gitea-Delivery"},
		parse:           parseGitHub,
	},
	Bitbucket: {
		verify:          verifyHMAC([]string{"X-Hub-Signature"}, "sha256="),
		eventHeaders:    []string{"X-Event-Key"},
		pushEvents:      []string{"repo:refs_changed"},
		pingEvents:      []string{"diagnostics:ping"},
		deliveryHeaders: []string{"X-Request-Id"},
		parse:           parseBitbucket,
	},
	Harbor: {
		// Harbor sends the policy's "auth header" value as Authorization.
		verify: verifyToken("Authorization"),
		parse:  parseHarbor,
	},
	Registry: {
		verify:          verifyHMAC([]string{"X-Driftless-Signature"}, "sha256="),
		deliveryHeaders: []string{"X-Driftless-Delivery"},
		parse:           parseRegistry,
	},
	Generic: {
		verify:          verifyHMAC([]string{"X-Driftless-Signature"}, "sha256="),
		deliveryHeaders: []string{"X-Driftless-Delivery"},
		parse:           parseGeneric,
	},
}

// ProviderNames lists the endpoints, sorted.
func ProviderNames() []string {
	names := make([]string, 0, len(providers))
	for name := range providers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// errUnauthenticated marks a request whose signature or token is missing
// or wrong. Its text names the header, never its value.
var errUnauthenticated = errors.New("unauthenticated")

func unauthenticated(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUnauthenticated}, args...)...)
}

// verifyHMAC checks an HMAC-SHA256 of the body, hex-encoded after prefix,
// in the first of headers present.
func verifyHMAC(headers []string, prefix string) func(http.Header, []byte, []byte) error {
	return func(h http.Header, body, secret []byte) error {
		name, value := first(h, headers)
		if value == "" {
			return unauthenticated("no %s header: give the webhook a secret", strings.Join(headers, " or "))
		}
		hexSum, ok := strings.CutPrefix(value, prefix)
		if !ok {
			return unauthenticated("the %s header does not start with %q", name, prefix)
		}
		got, err := hex.DecodeString(hexSum)
		if err != nil {
			return unauthenticated("the %s header is not hexadecimal", name)
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		if !hmac.Equal(got, mac.Sum(nil)) {
			return unauthenticated("the %s signature does not match the body signed with the webhook secret", name)
		}
		return nil
	}
}

// verifyToken compares a token header with secret in constant time (of
// the token's length too: both are hashed first).
func verifyToken(header string) func(http.Header, []byte, []byte) error {
	return func(h http.Header, _, secret []byte) error {
		value := h.Get(header)
		if value == "" {
			return unauthenticated("no %s header: give the webhook a secret token", header)
		}
		got, want := sha256.Sum256([]byte(value)), sha256.Sum256(secret)
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return unauthenticated("the %s header does not equal the webhook secret", header)
		}
		return nil
	}
}

// first returns the first of names present in h, and its value.
func first(h http.Header, names []string) (string, string) {
	for _, name := range names {
		if v := h.Get(name); v != "" {
			return name, v
		}
	}
	return "", ""
}
