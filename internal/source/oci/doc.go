// Package oci reads and writes OCI artifacts in the layout of Flux's
// `flux push artifact`: a manifest whose config has media type
// ConfigMediaType, one gzipped tarball layer of ContentMediaType holding
// the files, and the source, revision and creation time as annotations.
//
// It resolves a tag, a semver range or a pinned digest to a revision
// ("<tag>@sha256:<hex>", or the digest alone), verifies cosign key
// signatures of the artifact, extracts its files safely into a cache
// keyed by digest, and pushes a directory as such an artifact.
//
// It is not a registry client for images, and it never renders: the
// caller hands the extracted tree to the same generators as a git
// checkout (see internal/source.Mirror).
package oci
