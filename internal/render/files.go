package render

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
)

// maxFileSize bounds what one file may hold, so that a repository cannot
// make the agent read without limit.
const maxFileSize = 8 << 20

var errTooLarge = fmt.Errorf("file is larger than the %d MiB limit; split it into smaller files", maxFileSize>>20)

// generators returns what to read under r.opts.Paths, in reading order:
// Paths entry by entry, each walked depth-first with the entries of a
// directory in lexical order. A directory that holds a kustomization is
// one generator, and the walk does not go into it; so is a Paths entry
// that names a kustomization file. A file or kustomization reached
// through two entries is read once, at its first place.
func (r *renderer) generators() []generator {
	entries := r.opts.Paths
	if len(entries) == 0 {
		entries = []string{"."}
	}
	var gens []generator
	seen := map[string]bool{}
	add := func(g generator) {
		if !seen[g.path()] {
			seen[g.path()] = true
			gens = append(gens, g)
		}
	}
	for _, entry := range entries {
		start, err := entryName(entry)
		if err != nil {
			r.fail(Origin{}, "", err)
			continue
		}
		// The walk reports problems through r.fail and never stops early,
		// so WalkDir's own result is always nil.
		_ = fs.WalkDir(r.fsys, start, func(name string, d fs.DirEntry, err error) error {
			switch {
			case err != nil && name == start:
				r.fail(Origin{}, "", r.entryError(entry, err))
			case err != nil:
				r.fail(Origin{Path: name}, "", fmt.Errorf("cannot read: %w", err))
			case d.IsDir() && d.Name() == ".git":
				return fs.SkipDir
			case d.IsDir():
				if k, ok := r.kustomizationIn(name); ok {
					add(k)
					return fs.SkipDir
				}
			case name == start && isKustomizationFile(name):
				add(kustomization{dir: path.Dir(name), file: name})
			case !isManifest(name) && name == start:
				r.fail(Origin{}, "", fmt.Errorf("path %q is not a .yaml, .yml or .json file, nor a kustomization", entry))
			case isManifest(name) && !seen[name]:
				if !r.countFile() {
					return fs.SkipAll
				}
				add(manifestFile(name))
			}
			return nil
		})
		if r.over {
			break
		}
	}
	return gens
}

// entryName turns a Paths entry into a name in the checkout's fs.FS.
func entryName(entry string) (string, error) {
	if entry == "" {
		return "", errors.New(`path "" is empty; use "." for the whole repository`)
	}
	clean := filepath.Clean(entry)
	if filepath.IsAbs(entry) || !filepath.IsLocal(clean) {
		return "", fmt.Errorf("path %q is outside the repository; paths are relative to the repository root and cannot leave it", entry)
	}
	return filepath.ToSlash(clean), nil
}

func (r *renderer) entryError(entry string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("path %q not found in the repository%s", entry, r.atRevision())
	}
	return fmt.Errorf("path %q cannot be read: %w", entry, err)
}

// atRevision is " at revision <short revision>", or "" without a revision.
func (r *renderer) atRevision() string {
	if rev := r.shortRevision(); rev != "" {
		return " at revision " + rev
	}
	return ""
}

func isManifest(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readFile reads a file of the checkout, refusing files larger than
// maxFileSize and files that do not fit in what is left of the render's
// MaxBytes, with an error that wraps ErrOverBudget. The checkout's fs.FS
// refuses symbolic links that lead out of the checkout. A file encrypted
// with SOPS is returned decrypted (see decrypt), or with an error that
// wraps ErrEncrypted.
func (r *renderer) readFile(name string) ([]byte, error) {
	f, err := r.open(name)
	if err != nil {
		return nil, r.readError(name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, r.readError(name, err)
	}
	if !info.Mode().IsRegular() {
		return nil, r.readError(name, errors.New("not a regular file"))
	}
	if info.Size() > maxFileSize {
		return nil, errTooLarge
	}
	if info.Size() > r.bytesLeft() {
		return nil, r.filesOverBudget(info.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, min(maxFileSize, r.bytesLeft())+1))
	if err != nil {
		return nil, r.readError(name, err)
	}
	switch size := int64(len(data)); {
	case size > maxFileSize:
		return nil, errTooLarge
	case size > r.bytesLeft():
		return nil, r.filesOverBudget(size)
	}
	r.used.bytes += int64(len(data))
	return r.decrypt(name, data)
}

func (r *renderer) readError(name string, err error) error {
	if target, lerr := fs.ReadLink(r.fsys, name); lerr == nil {
		return fmt.Errorf("cannot follow symbolic link to %q: %w; a link must point at a file inside the repository", target, err)
	}
	return fmt.Errorf("cannot read file: %w", err)
}
