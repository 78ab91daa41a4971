package charts

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// Kinds of fetch failure, matched with errors.Is. Every error Fetch
// returns is one of them (wrapped in an *Error), or the context's error.
var (
	// ErrInvalidRef: the Ref cannot name a chart (no source, bad URL).
	ErrInvalidRef = errors.New("invalid chart reference")
	// ErrUnreachable: the repository or registry did not answer, or
	// answered with a server error.
	ErrUnreachable = errors.New("chart repository unreachable")
	// ErrUnauthorized: 401 or 403; the credentials are missing or wrong.
	ErrUnauthorized = errors.New("chart repository refused access")
	// ErrChartNotFound: the repository has no such chart or version.
	ErrChartNotFound = errors.New("chart not found")
	// ErrNoMatchingVersion: no version of the chart matches the range.
	ErrNoMatchingVersion = errors.New("no chart version matches")
	// ErrDigestMismatch: the downloaded archive is not the one the
	// repository's index or manifest names.
	ErrDigestMismatch = errors.New("chart digest mismatch")
	// ErrTooLarge: the index or the chart exceeds the Fetcher's limits.
	ErrTooLarge = errors.New("chart repository response too large")
	// ErrInvalidResponse: the repository answered something that is not
	// a Helm repository index or a Helm chart artifact.
	ErrInvalidResponse = errors.New("invalid chart repository response")
	// ErrHostNotAllowed: the repository, registry or download URL is on
	// a host Ref.Hosts does not allow; nothing was requested from it.
	ErrHostNotAllowed = errors.New("chart host not allowed")
)

// Error is a fetch failure: its message says what failed, where and what
// to do, without credentials; Kind is one of the Err* values above.
type Error struct {
	Kind error
	// Chart names the chart and its source (Ref.String).
	Chart string
	msg   string
	err   error
}

func (e *Error) Error() string { return e.msg }

// Is matches the Kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause, if any (already scrubbed).
func (e *Error) Unwrap() error { return e.err }

// failure builds an *Error whose message is msg with the credentials of
// ref scrubbed from it.
func failure(kind error, ref Ref, msg string, cause error) *Error {
	return &Error{Kind: kind, Chart: ref.String(), msg: scrub(msg, ref.Credentials), err: scrubErr(cause, ref.Credentials)}
}

func scrub(s string, c Credentials) string {
	for _, v := range c.secrets() {
		s = strings.ReplaceAll(s, v, "***")
	}
	return s
}

// scrubErr returns err without any URL it carries (which could hold a
// query or userinfo) and without the credentials' values.
func scrubErr(err error, c Credentials) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := scrub(err.Error(), c)
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// isNetwork tells a transport failure (refused, DNS, TLS, timeout) from
// an answer.
func isNetwork(err error) bool {
	var ue *url.Error
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.As(err, &oe)
}
