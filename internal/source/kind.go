package source

import "github.com/driftless/driftless/api/v1alpha1"

// Kind is the kind of source req fetches: v1alpha1.SourceOCI when OCI is
// set, else v1alpha1.SourceGit. It is the one place the package reads
// which field is set; Resolve, Checkout and the Mirror's methods switch
// on it.
func (r Request) Kind() v1alpha1.SourceKind {
	if r.OCI != nil {
		return v1alpha1.SourceOCI
	}
	return v1alpha1.SourceGit
}
