// Package redact hides Secret-derived values in text a user or a log can
// see: the one place where driftless masks secrets.
//
// A Set is built from every value of one render that came from a Secret
// (substituteFrom Secrets, files decrypted with SOPS, Secret objects'
// data and stringData, HelmChart valuesFrom Secrets). Set.String hides
// each value in every form it can take in a message: as is, quoted with
// Go's %q (the API server quotes invalid values so), escaped as a JSON or
// YAML string, encoded in base64 (standard and URL alphabets, at any
// alignment, as Secret data holds it), twice quoted, and any cut of it of
// 8 bytes or more (a message cut at a length limit, a long value shown
// with a part elided). Values shorter than 8 bytes are hidden only whole,
// where they stand apart from letters and digits; values shorter than 3
// bytes are not hidden (see MinLen).
//
// It does not decide which values are secret (the engine does) and does
// not parse what it masks: it works on bytes, so it holds for errors,
// events, logs and rendered objects alike.
package redact
