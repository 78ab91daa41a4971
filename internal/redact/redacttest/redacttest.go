// Package redacttest finds Secret values in text, for leak tests: it
// checks what redact hides, with its own list of encodings.
package redacttest

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Encodings are the forms a value is looked for in, by name.
var Encodings = []struct {
	Name   string
	Encode func(string) string
}{
	{"raw", func(v string) string { return v }},
	{"%q", func(v string) string { return unquote(strconv.Quote(v)) }},
	{"json", func(v string) string { b, _ := json.Marshal(v); return unquote(string(b)) }},
	{"yaml", func(v string) string {
		b, _ := yaml.Marshal(v)
		y := strings.TrimSpace(string(b))
		if len(y) >= 2 && (y[0] == '"' || y[0] == '\'') && y[len(y)-1] == y[0] {
			y = unquote(y) // as %q and json: the value without its quotes
		}
		return y
	}},
	{"base64", func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }},
}

func unquote(q string) string { return q[1 : len(q)-1] }

// CutLen is the length, in characters, of the cuts looked for.
const CutLen = 8

// Hit is a cut of a value found in an output.
type Hit struct {
	Value    int    // index of the value
	Encoding string // name of the encoding
	Cut      string // what was found
}

// Find returns the cuts of CutLen characters of every encoding of every
// value found in text (an encoding shorter than that is looked for
// whole), at most one per value and encoding, and the number of checks
// made (values × encodings).
func Find(text string, values []string) (hits []Hit, checks int) {
	for i, v := range values {
		for _, enc := range Encodings {
			checks++
			if cut, ok := findCut(text, enc.Encode(v)); ok {
				hits = append(hits, Hit{Value: i, Encoding: enc.Name, Cut: cut})
			}
		}
	}
	return hits, checks
}

func findCut(text, e string) (string, bool) {
	r := []rune(e)
	if len(r) <= CutLen {
		return e, strings.Contains(text, e)
	}
	for i := 0; i+CutLen <= len(r); i++ {
		if cut := string(r[i : i+CutLen]); strings.Contains(text, cut) {
			return cut, true
		}
	}
	return "", false
}

// Values are the leak tests' Secret values: quotes, backslashes,
// newlines, unicode, a 4 KiB PEM block, JSON, YAML, a value that looks
// like a number, and values short enough to be hidden only whole.
func Values() []string {
	return []string{
		`a"b`,
		`pass"word"quoted`,
		`back\slash\path\C:\temp`,
		"line one\nline two\nline three",
		"tab\tand\rcarriage",
		"ünïcödé-pässwörd-日本語",
		"emoji-🔑-key-🔒-lock",
		PEM(4096),
		`{"user":"admin","password":"hunter2-json"}`,
		"key: yaml-value\nnested:\n  - item-one",
		"12345678901234",
		"0x1F2E3D4C5B",
		"'single'quoted'value'",
		"<html>&amp;</html>-escaped",
		"trailing-space-value   ",
		"s3cr3t-plain-token-value",
		"Zm9vYmFyYmF6cXV4",
		"=+/base64ish+/==",
		"percent%sand%dverbs",
		"7q#Kx!",
	}
}

// PEM returns a PEM block of about n bytes, made of deterministic
// bytes (not a key).
func PEM(n int) string {
	body := make([]byte, n*3/4)
	x := uint32(2463534242)
	for i := range body {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		body[i] = byte(x)
	}
	enc := base64.StdEncoding.EncodeToString(body)
	var b strings.Builder
	b.WriteString("-----BEGIN PRIVATE KEY-----\n")
	for len(enc) > 64 {
		b.WriteString(enc[:64] + "\n")
		enc = enc[64:]
	}
	b.WriteString(enc + "\n-----END PRIVATE KEY-----\n")
	return b.String()
}
