package cli

import (
	"github.com/spf13/pflag"

	"github.com/driftless/driftless/internal/render"
)

// addBudgetFlags adds the --render-max-* flags, which bound one render,
// to f: the agent's, and those of diff and build, so that they render
// within the same bounds as the agent they stand for.
func addBudgetFlags(f *pflag.FlagSet, b *render.Budgets) {
	d := render.DefaultBudgets()
	f.IntVar(&b.MaxFiles, "render-max-files", d.MaxFiles, "most manifest files one render may read; a larger render is refused (BuildFailed) and nothing is applied")
	f.IntVar(&b.MaxDocuments, "render-max-documents", d.MaxDocuments, "most YAML documents (empty ones included) one render may hold")
	f.IntVar(&b.MaxObjects, "render-max-objects", d.MaxObjects, "most objects (after Lists are expanded) one render may produce")
	f.Int64Var(&b.MaxBytes, "render-max-bytes", d.MaxBytes, "most bytes one render may read from files, and may decode to with YAML aliases expanded")
}
