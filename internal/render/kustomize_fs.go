package render

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// repoFS is the checkout as Kustomize sees it: a read-only
// filesys.FileSystem of absolute paths that reads the files of the
// repository and nothing else. It reads through the render's os.Root, so
// no symbolic link leads out of the checkout, and refuses every path
// outside it, which Kustomize, told to load from anywhere so that bases in
// ../base work, would otherwise read. Reads count against the render's
// budgets like those of manifest files, each time a file is read.
//
// It does not stop Kustomize from fetching remote bases and resources,
// which bypass the filesystem: checkReferences refuses them first.
type repoFS struct {
	r   *renderer
	dir string // the checkout: absolute, clean, without symbolic links
	// replaced holds contents to serve instead of a file's, by name.
	replaced map[string][]byte
	// refused is the first read refused because it was outside the
	// repository or over a budget, in the words to report.
	refused error
	// decrypted is set once a file encrypted with SOPS was read.
	decrypted bool
}

var _ filesys.FileSystem = (*repoFS)(nil)

// errReadOnly is returned by every method that would write.
var errReadOnly = errors.New("the repository is read-only to kustomize")

// repoFS returns a filesystem for one build.
func (r *renderer) repoFS() (*repoFS, error) {
	if r.checkoutDir == "" {
		abs, err := filepath.Abs(r.opts.Root)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("checkout cannot be resolved for kustomize: %w", err)
		}
		r.checkoutDir = abs
	}
	return &repoFS{r: r, dir: r.checkoutDir, replaced: map[string][]byte{}}, nil
}

// abs returns the absolute path of name, a name in the checkout.
func (f *repoFS) abs(name string) string { return filepath.Join(f.dir, filepath.FromSlash(name)) }

// refuse records err as the first refused read, and returns it.
func (f *repoFS) refuse(err error) error {
	if f.refused == nil {
		f.refused = err
	}
	return err
}

// name returns the name in the checkout of p, an absolute path, or an
// error if p is outside the checkout.
func (f *repoFS) name(p string) (string, error) {
	rel, err := filepath.Rel(f.dir, filepath.Clean(p))
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		shown := p
		if err == nil {
			shown = filepath.ToSlash(rel)
		}
		return "", f.refuse(fmt.Errorf("kustomize reads %s, which is outside the repository; %w", shown, errOutside))
	}
	return filepath.ToSlash(rel), nil
}

// resolve returns name with its symbolic links followed, or an error if
// one of them leads out of the checkout.
func (f *repoFS) resolve(name string) (string, error) {
	dir, inner := f.dir, name
	m, in := f.r.mountOf(name)
	if m != nil {
		dir, inner = m.dir, in
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.FromSlash(inner)))
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, real)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", f.refuse(fmt.Errorf("%s is, or passes through, a symbolic link that leads out of the repository; %w", f.r.shownName(name), errOutside))
	}
	if m != nil {
		return path.Join(m.prefix, filepath.ToSlash(rel)), nil
	}
	return filepath.ToSlash(rel), nil
}

// CleanedAbs splits p into its directory and file, following symbolic
// links, as the filesystem of the disk does; for a directory, the file is
// "".
func (f *repoFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	name, err := f.name(p)
	if err != nil {
		return "", "", err
	}
	real, err := f.resolve(name)
	if err != nil {
		return "", "", err
	}
	info, err := f.r.stat(real)
	if err != nil {
		return "", "", err
	}
	if info.IsDir() {
		return filesys.ConfirmedDir(f.abs(real)), "", nil
	}
	return filesys.ConfirmedDir(f.abs(path.Dir(real))), path.Base(real), nil
}

// ReadFile reads a file of the checkout, counting it against the budgets.
// A document with YAML aliases is measured before Kustomize expands them.
func (f *repoFS) ReadFile(p string) ([]byte, error) {
	name, err := f.name(p)
	if err != nil {
		return nil, err
	}
	if data, ok := f.replaced[name]; ok {
		return data, nil
	}
	data, err := f.r.readFile(name)
	switch {
	case errors.Is(err, ErrOverBudget), errors.Is(err, errTooLarge):
		return nil, f.refuse(fmt.Errorf("%s: %w", name, err))
	case errors.Is(err, ErrEncrypted):
		return nil, f.refuse(err)
	case err != nil:
		if _, rerr := f.resolve(name); errors.Is(rerr, errOutside) {
			return nil, rerr
		}
		return nil, err
	}
	f.decrypted = f.decrypted || f.r.decrypted[name]
	if err := f.r.countRead(name); err != nil {
		return nil, f.refuse(err)
	}
	if err := f.checkAliases(name, data); err != nil {
		return nil, f.refuse(err)
	}
	return data, nil
}

// checkAliases returns an error wrapping ErrOverBudget if a YAML document
// of data would not fit in what is left of the decoded budget once its
// aliases were expanded.
func (f *repoFS) checkAliases(name string, data []byte) error {
	if !mayAlias(data) {
		return nil
	}
	for _, doc := range splitYAML(data, math.MaxInt-1) {
		if !mayAlias(doc.data) {
			continue
		}
		// A document that does not parse is Kustomize's to report.
		if size, err := expandedSize(doc, f.r.decodedLeft()); err == nil && size > f.r.decodedLeft() {
			return fmt.Errorf("%s:%d (document %d): %w", name, doc.line, doc.index, f.r.aliasesError())
		}
	}
	return nil
}

// Exists reports whether p is a file or directory of the checkout.
func (f *repoFS) Exists(p string) bool {
	name, err := f.name(p)
	if err != nil {
		return false
	}
	_, err = f.r.stat(name)
	return err == nil
}

// IsDir reports whether p is a directory of the checkout.
func (f *repoFS) IsDir(p string) bool {
	name, err := f.name(p)
	if err != nil {
		return false
	}
	info, err := f.r.stat(name)
	return err == nil && info.IsDir()
}

// ReadDir returns the names of the entries of directory p.
func (f *repoFS) ReadDir(p string) ([]string, error) {
	name, err := f.name(p)
	if err != nil {
		return nil, err
	}
	d, err := f.r.open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	dir, ok := d.(fs.ReadDirFile)
	if !ok {
		return nil, fmt.Errorf("%s is not a directory", f.r.shownName(name))
	}
	entries, err := dir.ReadDir(-1)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, err
}

// Open is not offered: Kustomize builds with ReadFile, which counts what
// it reads.
func (f *repoFS) Open(p string) (filesys.File, error) {
	return nil, fmt.Errorf("open %s: not offered to kustomize; it reads files whole", p)
}

// Glob is not offered: Kustomize does not glob when it builds.
func (f *repoFS) Glob(pattern string) ([]string, error) {
	return nil, fmt.Errorf("glob %s: not offered to kustomize", pattern)
}

// Walk is not offered: Kustomize does not walk directories when it builds.
func (f *repoFS) Walk(p string, _ filepath.WalkFunc) error {
	return fmt.Errorf("walk %s: not offered to kustomize", p)
}

func (f *repoFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (f *repoFS) Mkdir(string) error                  { return errReadOnly }
func (f *repoFS) MkdirAll(string) error               { return errReadOnly }
func (f *repoFS) RemoveAll(string) error              { return errReadOnly }
func (f *repoFS) WriteFile(string, []byte) error      { return errReadOnly }
