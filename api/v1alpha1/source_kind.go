package v1alpha1

// SourceKind is the kind of a Sync's source, named as its field in
// spec.source: where the files come from and how they are fetched.
type SourceKind string

// The kinds of source.
const (
	// SourceGit is a git repository (spec.source.git).
	SourceGit SourceKind = "git"
	// SourceOCI is an artifact in an OCI registry (spec.source.oci).
	SourceOCI SourceKind = "oci"
)

// Kind is the kind of s: SourceOCI when spec.source.oci is set, else
// SourceGit. Code that does one thing per kind switches on it, in one
// place per package, rather than testing the fields.
func (s Source) Kind() SourceKind {
	if s.OCI != nil {
		return SourceOCI
	}
	return SourceGit
}
