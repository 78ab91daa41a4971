package render

import (
	"errors"
	"fmt"
)

// Budgets bound what one render may read and hold, so that a repository
// cannot make the agent run out of memory: not with many files, nor with a
// small YAML document whose anchors and aliases expand to gigabytes.
//
// A field that is zero or negative takes its value from DefaultBudgets, so
// the zero Budgets is the defaults. A render that exceeds a budget is
// refused as a whole; its error wraps ErrOverBudget.
type Budgets struct {
	// MaxFiles bounds the number of manifest files under Options.Paths.
	// The agent's flag is --render-max-files.
	MaxFiles int
	// MaxDocuments bounds the number of YAML documents in all files,
	// empty ones included; a .json file is one document. The agent's flag
	// is --render-max-documents.
	MaxDocuments int
	// MaxObjects bounds the number of objects, after v1 Lists are
	// expanded. The agent's flag is --render-max-objects.
	MaxObjects int
	// MaxBytes bounds, each on its own, two sizes: the bytes read from the
	// files, and the decoded size of the documents, which is the length of
	// every key and string plus one for every other value, counting a
	// value as often as YAML aliases repeat it. A document with aliases is
	// measured before they are expanded. The agent's flag is
	// --render-max-bytes.
	MaxBytes int64
}

// DefaultBudgets returns the budgets of a render that sets none: 50,000
// files, 100,000 documents, 50,000 objects and 64 MiB. They are several
// times what large repositories need, and they stop a render well before
// the agent's default memory limit of 512 MiB: decoding a document takes
// about three times its decoded size at its peak (a 60 MiB document, 200
// MiB of heap), and the agent keeps about 4 KB for each object it renders.
func DefaultBudgets() Budgets {
	return Budgets{
		MaxFiles:     50_000,
		MaxDocuments: 100_000,
		MaxObjects:   50_000,
		MaxBytes:     64 << 20,
	}
}

// withDefaults fills in the fields that are not set.
func (b Budgets) withDefaults() Budgets {
	d := DefaultBudgets()
	if b.MaxFiles <= 0 {
		b.MaxFiles = d.MaxFiles
	}
	if b.MaxDocuments <= 0 {
		b.MaxDocuments = d.MaxDocuments
	}
	if b.MaxObjects <= 0 {
		b.MaxObjects = d.MaxObjects
	}
	if b.MaxBytes <= 0 {
		b.MaxBytes = d.MaxBytes
	}
	return b
}

// ErrOverBudget is wrapped by the error of a render that exceeds one of its
// Budgets.
var ErrOverBudget = errors.New("render budget exceeded")

// usage is what a render has used of its budgets so far.
type usage struct {
	files, documents, objects int
	bytes, decoded            int64
}

// overBudget returns the error of a render that exceeds a budget. why says
// what, with the numbers; flag is the agent flag that raises the budget.
func overBudget(why, flag string) error {
	return fmt.Errorf("%w: %s; render less (fewer paths, or split them across Syncs), or raise the agent's %s", ErrOverBudget, why, flag)
}

// stop records err, which wraps ErrOverBudget, at o; the render reads
// nothing more.
func (r *renderer) stop(o Origin, object string, err error) {
	r.over = true
	r.fail(o, object, err)
}

// countFile counts a manifest file and reports whether it is within budget.
func (r *renderer) countFile() bool {
	r.used.files++
	if r.used.files > r.budgets.MaxFiles {
		r.stop(Origin{}, "", r.filesError())
		return false
	}
	return true
}

// countRead counts a file a kustomization reads, once per render, and
// returns an error wrapping ErrOverBudget if it is over budget.
func (r *renderer) countRead(name string) error {
	if r.read[name] {
		return nil
	}
	if r.read == nil {
		r.read = map[string]bool{}
	}
	r.read[name] = true
	r.used.files++
	if r.used.files > r.budgets.MaxFiles {
		return r.filesError()
	}
	return nil
}

func (r *renderer) filesError() error {
	return overBudget(fmt.Sprintf("the paths hold more than %d manifest files", r.budgets.MaxFiles), "--render-max-files")
}

// countDocument counts the document at o and reports whether it is within
// budget.
func (r *renderer) countDocument(o Origin) bool {
	r.used.documents++
	if r.used.documents > r.budgets.MaxDocuments {
		r.stop(o, "", overBudget(fmt.Sprintf("this is document %d of the render, over the limit of %d", r.used.documents, r.budgets.MaxDocuments), "--render-max-documents"))
		return false
	}
	return true
}

// documentsLeft is how many more documents the render may hold.
func (r *renderer) documentsLeft() int { return r.budgets.MaxDocuments - r.used.documents }

// countObject counts an object from o and reports whether it is within
// budget.
func (r *renderer) countObject(o Origin, object string) bool {
	r.used.objects++
	if r.used.objects > r.budgets.MaxObjects {
		r.stop(o, object, overBudget(fmt.Sprintf("this is object %d of the render, over the limit of %d", r.used.objects, r.budgets.MaxObjects), "--render-max-objects"))
		return false
	}
	return true
}

// bytesLeft is how many more bytes the render may read from files.
func (r *renderer) bytesLeft() int64 { return r.budgets.MaxBytes - r.used.bytes }

// filesOverBudget returns the error for a file of size bytes that does not
// fit in what is left of MaxBytes.
func (r *renderer) filesOverBudget(size int64) error {
	return overBudget(fmt.Sprintf("the files read before this one hold %s and this one %s, over the limit of %s",
		formatBytes(r.used.bytes), formatBytes(size), formatBytes(r.budgets.MaxBytes)), "--render-max-bytes")
}

// decodedLeft is how many more decoded bytes the render may hold.
func (r *renderer) decodedLeft() int64 { return r.budgets.MaxBytes - r.used.decoded }

// countDecoded counts the decoded size of the document at o and reports
// whether it is within budget.
func (r *renderer) countDecoded(o Origin, size int64) bool {
	if size > r.decodedLeft() {
		r.stop(o, "", overBudget(fmt.Sprintf("the documents decoded before this one hold %s and this one %s, over the limit of %s",
			formatBytes(r.used.decoded), formatBytes(size), formatBytes(r.budgets.MaxBytes)), "--render-max-bytes"))
		return false
	}
	r.used.decoded += size
	return true
}

// aliasesOverBudget records that the document at o would exceed MaxBytes
// once its aliases were expanded.
func (r *renderer) aliasesOverBudget(o Origin) {
	r.stop(o, "", r.aliasesError())
}

// aliasesError is the error of a document whose aliases would exceed
// MaxBytes once expanded.
func (r *renderer) aliasesError() error {
	return overBudget(fmt.Sprintf("expanding the YAML aliases of this document would take more than the %s left of the limit of %s on decoded documents; repeat large values through aliases less often",
		formatBytes(r.decodedLeft()), formatBytes(r.budgets.MaxBytes)), "--render-max-bytes")
}

// formatBytes says n in the largest unit that keeps it at least 1:
// "512 B", "3.5 KiB", "128 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if value < unit {
			break
		}
		value, suffix = value/unit, s
	}
	if value == float64(int64(value)) {
		return fmt.Sprintf("%d %s", int64(value), suffix)
	}
	return fmt.Sprintf("%.1f %s", value, suffix)
}
