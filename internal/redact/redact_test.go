package redact_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/internal/redact"
	"github.com/driftless/driftless/internal/redact/redacttest"
)

// messages are the ways a value shows up in what a user or a log sees.
var messages = []struct {
	name string
	make func(v string) string
}{
	{"as is", func(v string) string { return "the value is " + v + " here" }},
	{"quoted by the API server", func(v string) string {
		return fmt.Sprintf(`ConfigMap "app" is invalid: metadata.labels: Invalid value: %q: a valid label must be 63 characters`, v)
	}},
	{"quoted twice", func(v string) string { return fmt.Sprintf("apply failed: %q", fmt.Sprintf("Invalid value: %q", v)) }},
	{"in JSON", func(v string) string {
		b, _ := json.Marshal(map[string]string{"message": fmt.Sprintf("Invalid value: %q", v), "raw": v})
		return string(b)
	}},
	{"in YAML", func(v string) string {
		b, _ := yaml.Marshal(map[string]any{"data": map[string]string{"pw": v}, "list": []string{v + "\n"}})
		return string(b)
	}},
	{"in Secret data", func(v string) string {
		return `{"data":{"pw":"` + base64.StdEncoding.EncodeToString([]byte(v)) + `"}}`
	}},
	{"in a base64 blob at each alignment", func(v string) string {
		var out []string
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			for off := range 3 {
				out = append(out, enc.EncodeToString([]byte(strings.Repeat("x", off)+v+"tail")))
			}
		}
		return strings.Join(out, " ")
	}},
	{"cut at a length limit", func(v string) string {
		msg := fmt.Sprintf("Invalid value: %q", v)
		return msg[:min(len(msg), 15+len(msg)/2)] + "…"
	}},
	{"with a prefix elided", func(v string) string {
		q := fmt.Sprintf("%q", v)
		return "found …" + q[len(q)/2:]
	}},
}

func TestStringHidesEveryFormOfEveryValue(t *testing.T) {
	values := redacttest.Values()
	set := redact.New(values...)
	checks := 0
	for _, m := range messages {
		t.Run(m.name, func(t *testing.T) {
			for i, v := range values {
				if len(v) < redact.CutLen && m.name == "in a base64 blob at each alignment" {
					continue // short values are hidden whole only
				}
				got := set.String(m.make(v))
				hits, n := redacttest.Find(got, values[i:i+1])
				checks += n
				for _, h := range hits {
					t.Errorf("value %d (%.20q…) %s: %q left in %.200q", i, v, h.Encoding, h.Cut, got)
				}
			}
		})
	}
	t.Logf("%d values × %d messages × %d encodings: %d checks", len(values), len(messages), len(redacttest.Encodings), checks)
}

func TestStringKeepsWhatIsNotSecret(t *testing.T) {
	set := redact.New("abc", "s3cr3t-plain-token", "xy")
	for _, tc := range []struct{ name, in, want string }{
		{"text without values", "Deployment/web/api apply failed: timeout", "Deployment/web/api apply failed: timeout"},
		{"a long value and its cut", `label "s3cr3t-plain-token" and "s3cr3t-pl…"`, `label "***" and "***…"`},
		{"a short value standing apart", `Invalid value: "abc": bad`, `Invalid value: "***": bad`},
		{"a short value inside a word is not hidden", "abcdef and xabc", "abcdef and xabc"},
		{"values shorter than MinLen are not hidden", "xy", "xy"},
		{"two values side by side are one placeholder", "s3cr3t-plain-tokens3cr3t-plain-token!", "***!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := set.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestStringNeverSplitsACharacter(t *testing.T) {
	v := "ünïcödé-pässwörd"
	got := redact.New(v).String("x" + v[3:] + "y")
	if got != "x***y" {
		t.Errorf("got %q, want %q", got, "x***y")
	}
}

func TestErrorKeepsTheChainAndHidesTheText(t *testing.T) {
	base := fmt.Errorf("apply: Invalid value: %q: %w", `pass"word"quoted`, fs.ErrInvalid)
	err := redact.New(`pass"word"quoted`).Error(base)
	if !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("errors.Is lost the chain")
	}
	if want := `apply: Invalid value: "***": invalid argument`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if got := redact.New("unrelated-value").Error(base); got != base {
		t.Errorf("an error with nothing to hide was wrapped")
	}
	var nilSet *redact.Set
	if got := nilSet.Error(base); got != base {
		t.Errorf("a nil Set changed the error")
	}
}

func TestValueHidesStringsAndKeysInPlace(t *testing.T) {
	obj := map[string]any{"data": map[string]any{"s3cr3t-plain-token": "x s3cr3t-plain-token y", "n": 3.0}, "list": []any{"abc"}}
	redact.New("s3cr3t-plain-token", "abc").Value(obj)
	want := `{"data":{"***":"x *** y","n":3},"list":["***"]}`
	if b, _ := json.Marshal(obj); string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

// BenchmarkString masks a 64 KiB message with 100 values, against the
// cost of looking for each value as is (strings.Contains) in the same
// message: the baseline that found exact copies only.
func BenchmarkString(b *testing.B) {
	values := make([]string, 100)
	for i := range values {
		values[i] = fmt.Sprintf("secret-value-%03d-%s", i, strings.Repeat("q", i%40))
	}
	var msg strings.Builder
	for msg.Len() < 64<<10 {
		fmt.Fprintf(&msg, "Deployment/ns-%d/app-%d apply failed: Invalid value: %q; ", msg.Len(), msg.Len()%97, "not-a-secret-but-long")
	}
	text := msg.String() + values[50]
	set := redact.New(values...)
	b.Run("contains baseline", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			for _, v := range values {
				if strings.Contains(text, v) {
					_ = v
				}
			}
		}
	})
	b.Run("set", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			_ = set.String(text)
		}
	})
}
