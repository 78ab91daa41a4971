package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// Placeholder replaces every hidden part of a text.
const Placeholder = "***"

const (
	// CutLen is the shortest cut of a value that is hidden wherever it
	// appears: every run of CutLen bytes of any form of a value is. A
	// value of CutLen bytes or more is hidden whole, in part or cut.
	CutLen = 8
	// MinLen is the shortest value hidden at all. Values of MinLen to
	// CutLen-1 bytes are hidden only whole, and only where they stand
	// apart from letters and digits, so that a short value does not
	// hide parts of ordinary words; shorter ones are left alone, as
	// they cannot be told from ordinary text.
	MinLen = 3
)

// Set is the Secret-derived values to hide. The zero value and nil hide
// nothing. A Set is not safe for concurrent Add; once built, String and
// the other readers may be called concurrently.
type Set struct {
	// grams holds every run of CutLen bytes of every long form, as a
	// little-endian uint64; filter is a bitset over their hashes that
	// rules most positions out without a map lookup.
	grams  map[uint64]struct{}
	filter []uint64
	// short holds the forms shorter than CutLen, hidden whole.
	short map[string]struct{}
	// values counts the values added (for tests and metrics).
	values int
}

// New returns a Set of values.
func New(values ...string) *Set {
	s := &Set{}
	s.Add(values...)
	return s
}

// Add adds values to s. Values shorter than MinLen are ignored.
func (s *Set) Add(values ...string) {
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		s.values++
		for _, f := range forms(v) {
			s.addForm(f)
		}
	}
	s.buildFilter()
}

// Len is the number of values s hides.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.values
}

func (s *Set) addForm(f string) {
	if len(f) < MinLen {
		return
	}
	if len(f) < CutLen {
		if s.short == nil {
			s.short = map[string]struct{}{}
		}
		s.short[f] = struct{}{}
		return
	}
	if s.grams == nil {
		s.grams = map[uint64]struct{}{}
	}
	for i := 0; i+CutLen <= len(f); i++ {
		s.grams[gram(f, i)] = struct{}{}
	}
}

func (s *Set) buildFilter() {
	if len(s.grams) == 0 {
		s.filter = nil
		return
	}
	bits := 1024
	for bits < 16*len(s.grams) {
		bits *= 2
	}
	s.filter = make([]uint64, bits/64)
	for g := range s.grams {
		h := hash(g, len(s.filter))
		s.filter[h/64] |= 1 << (h % 64)
	}
}

// gram is the CutLen bytes of f at i as a little-endian uint64.
func gram(f string, i int) uint64 {
	var g uint64
	for j := CutLen - 1; j >= 0; j-- {
		g = g<<8 | uint64(f[i+j])
	}
	return g
}

// hash is g's bit in a filter of words 64-bit words (a power of two).
func hash(g uint64, words int) uint64 {
	return (g * 0x9E3779B97F4A7C15) >> 32 & uint64(words*64-1)
}

// String returns msg with every form of every value of s, and every cut
// of CutLen bytes or more of one, replaced by Placeholder. Adjacent or
// overlapping hidden parts become one Placeholder. A hidden part never
// splits a UTF-8 character.
func (s *Set) String(msg string) string {
	if s == nil || s.values == 0 || len(msg) < MinLen {
		return msg
	}
	var spans []span
	if len(s.grams) > 0 && len(msg) >= CutLen {
		words := len(s.filter)
		var g uint64
		for i := 0; i < CutLen-1; i++ {
			g |= uint64(msg[i]) << (8 * (i + 1))
		}
		for i := 0; i+CutLen <= len(msg); i++ {
			g = g>>8 | uint64(msg[i+CutLen-1])<<56
			h := hash(g, words)
			if s.filter[h/64]&(1<<(h%64)) == 0 {
				continue
			}
			if _, ok := s.grams[g]; !ok {
				continue
			}
			if n := len(spans); n > 0 && spans[n-1].end >= i {
				spans[n-1].end = i + CutLen
				continue
			}
			spans = append(spans, span{i, i + CutLen})
		}
	}
	for f := range s.short {
		for from := 0; ; {
			j := strings.Index(msg[from:], f)
			if j < 0 {
				break
			}
			start, end := from+j, from+j+len(f)
			if standsApart(msg, start, end) {
				spans = insert(spans, span{start, end})
			}
			from = start + 1
		}
	}
	if len(spans) == 0 {
		return msg
	}
	var b strings.Builder
	b.Grow(len(msg))
	last, open := 0, false
	for _, sp := range spans {
		start, end := sp.start, sp.end
		for start > 0 && !utf8.RuneStart(msg[start]) {
			start--
		}
		for end < len(msg) && !utf8.RuneStart(msg[end]) {
			end++
		}
		if open && start <= last {
			last = max(last, end)
			continue
		}
		b.WriteString(msg[last:start])
		b.WriteString(Placeholder)
		last, open = end, true
	}
	b.WriteString(msg[last:])
	return b.String()
}

type span struct{ start, end int }

// insert adds sp to spans, sorted by start, merging overlaps.
func insert(spans []span, sp span) []span {
	i := 0
	for i < len(spans) && spans[i].start <= sp.start {
		i++
	}
	spans = append(spans, span{})
	copy(spans[i+1:], spans[i:])
	spans[i] = sp
	out := spans[:1]
	for _, x := range spans[1:] {
		if last := &out[len(out)-1]; x.start <= last.end {
			last.end = max(last.end, x.end)
			continue
		}
		out = append(out, x)
	}
	return out
}

// standsApart reports whether msg[start:end] has no letter or digit
// right before or after it.
func standsApart(msg string, start, end int) bool {
	word := func(b byte) bool {
		return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_' || b >= utf8.RuneSelf
	}
	return (start == 0 || !word(msg[start-1])) && (end == len(msg) || !word(msg[end]))
}

// Error returns err with its message passed through String; errors.Is and
// errors.As still see err. nil stays nil, and an error with nothing to
// hide is returned as is.
func (s *Set) Error(err error) error {
	if err == nil || s.Len() == 0 {
		return err
	}
	msg := err.Error()
	masked := s.String(msg)
	if masked == msg {
		return err
	}
	return &maskedError{msg: masked, err: err}
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// Value hides, in place, every string of v (a decoded JSON value: maps,
// slices, strings) and every map key, and returns v.
func (s *Set) Value(v any) any {
	if s.Len() == 0 {
		return v
	}
	switch v := v.(type) {
	case map[string]any:
		for k, item := range v {
			masked := s.String(k)
			if masked != k {
				delete(v, k)
			}
			v[masked] = s.Value(item)
		}
		return v
	case []any:
		for i, item := range v {
			v[i] = s.Value(item)
		}
		return v
	case string:
		return s.String(v)
	}
	return v
}

// forms returns the forms v can take in a message.
func forms(v string) []string {
	inner := func(q string) string {
		if len(q) >= 2 {
			return q[1 : len(q)-1]
		}
		return q
	}
	quoted := strconv.Quote(v)
	out := []string{
		v,
		inner(quoted),
		inner(strconv.QuoteToASCII(v)),
		inner(jsonString(v, true)),
		inner(jsonString(v, false)),
		// Twice quoted (an error quoted into another), without the
		// escaped inner quotes.
		inner2(strconv.Quote(quoted)),
		inner2(jsonString(quoted, false)),
		inner2(strconv.Quote(jsonString(v, false))),
		inner2(jsonString(jsonString(v, false), false)),
		// YAML: single-quoted, and as sigs.k8s.io/yaml writes it.
		strings.ReplaceAll(v, "'", "''"),
	}
	if y, err := yaml.Marshal(v); err == nil {
		y := strings.TrimSuffix(string(y), "\n")
		if len(y) >= 2 && (y[0] == '"' || y[0] == '\'') && y[len(y)-1] == y[0] {
			y = inner(y)
		}
		out = append(out, y)
	}
	if len(v) < CutLen {
		// Hidden whole only: base64 of the value alone, as a Secret's
		// data holds it.
		return append(out, base64.StdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte(v)))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, enc.EncodeToString([]byte(v)))
		for off := range 3 {
			// v at offset off of a longer encoded blob: the groups
			// made of v's bytes alone.
			data := append(bytes.Repeat([]byte{0}, off), v...)
			e := enc.EncodeToString(data)
			start := 0
			if off > 0 {
				start = 4
			}
			if end := 4 * (len(data) / 3); end > start {
				out = append(out, e[start:end])
			}
		}
	}
	return out
}

// inner2 strips a twice-quoted string of its quotes on each side: `"\"`
// and `\""`.
func inner2(q string) string {
	if len(q) >= 6 {
		return q[3 : len(q)-3]
	}
	return q
}

func jsonString(v string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}
