package oci

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Limits bound the files of one artifact. Zero fields are unbounded;
// the caller passes the limits of a git checkout.
type Limits struct {
	MaxDepth     int
	MaxEntries   int
	MaxFileSize  int64
	MaxTotalSize int64
}

// An EntryError is an artifact whose tarball Extract refuses: it names
// the entry and says why. Nothing of such an artifact is kept.
type EntryError struct {
	Path   string
	Reason string
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("entry %q %s: driftless extracts no such artifact; push one without it", e.Path, e.Reason)
}

// Extract writes the gzipped tarball r into dir, which must exist and be
// empty. It refuses (with an *EntryError) absolute names, names with
// "..", hard links, devices, a symbolic link whose target is absolute,
// leaves dir or passes through another link, and anything past limits:
// every header counts as an entry (pax global headers too), and what is
// not a file's contents may take MaxHeaderBytes an entry on average.
// On error dir may hold part of the files: the caller removes it.
func Extract(r io.Reader, dir string, limits Limits) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("the layer is not gzip: %w", err)
	}
	defer gz.Close()
	in := &counter{r: gz}
	hr := &headers{tr: tar.NewReader(in), in: in, maxEntries: limits.MaxEntries}
	var total int64
	links := map[string]string{}
	for {
		h, err := hr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if depth := strings.Count(name, "/") + 1; limits.MaxDepth > 0 && depth > limits.MaxDepth {
			return &EntryError{Path: name, Reason: fmt.Sprintf("is %d names deep, past the limit of %d", depth, limits.MaxDepth)}
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if _, ok := links[p]; ok {
				return &EntryError{Path: name, Reason: "is under a symbolic link"}
			}
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if limits.MaxFileSize > 0 && h.Size > limits.MaxFileSize {
				return &EntryError{Path: name, Reason: fmt.Sprintf("has %d bytes, past the limit of %d a file", h.Size, limits.MaxFileSize)}
			}
			total += h.Size
			if limits.MaxTotalSize > 0 && total > limits.MaxTotalSize {
				return &EntryError{Path: name, Reason: fmt.Sprintf("brings the files past the limit of %d bytes in all", limits.MaxTotalSize)}
			}
			if err := writeFile(target, hr.tr, h); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := linkTarget(name, h.Linkname); err != nil {
				return err
			}
			links[name] = h.Linkname
		default:
			return &EntryError{Path: name, Reason: fmt.Sprintf("is of tar type %q; only files, directories and symbolic links are extracted", h.Typeflag)}
		}
	}
	// Links are made last, once every name is known: a link may point
	// neither through nor at another link, so what it names is a file
	// or directory inside dir.
	for name, to := range links {
		if through := linkOnWay(links, name, to); through != "" {
			return &EntryError{Path: name, Reason: fmt.Sprintf("is a symbolic link to %q, through the symbolic link %q", to, through)}
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(to, target); err != nil {
			return &EntryError{Path: name, Reason: "is a symbolic link where a file or directory is"}
		}
	}
	return nil
}

// MaxHeaderBytes bounds what a tarball holds besides its files' contents
// (headers, pax and GNU long-name records, padding, the contents of
// entries that are not files), on average over its entries: a legitimate
// entry takes one to three 512-byte blocks of it.
const MaxHeaderBytes = 4 << 10

// headers reads the headers of a tarball. Every header it returns counts
// as an entry, pax global headers too; the bytes of the tarball that are
// not a file's contents count against MaxHeaderBytes an entry.
type headers struct {
	tr         *tar.Reader
	in         *counter
	maxEntries int
	entries    int
	bytes      int64 // read so far that are not files' contents
	mark, size int64 // in.n after the last header; the contents it announced
}

func (r *headers) next() (*tar.Header, error) {
	h, err := r.tr.Next()
	if errors.Is(err, io.EOF) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("the layer is not a tarball: %w", err)
	}
	r.entries++
	r.bytes += r.in.n - r.mark - r.size
	r.mark, r.size = r.in.n, 0
	if h.Typeflag == tar.TypeReg {
		r.size = h.Size
	}
	name := h.Name
	if h.Typeflag == tar.TypeXGlobalHeader {
		name = "(pax global header)"
	}
	if r.maxEntries > 0 && r.entries > r.maxEntries {
		return nil, &EntryError{Path: name, Reason: fmt.Sprintf("is past the limit of %d entries", r.maxEntries)}
	}
	if r.bytes > int64(r.entries)*MaxHeaderBytes {
		return nil, &EntryError{Path: name, Reason: fmt.Sprintf("brings the tarball to %d bytes of tar headers in %d entries, past the limit of %d bytes of tar headers an entry",
			r.bytes, r.entries, MaxHeaderBytes)}
	}
	return h, nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func entryName(raw string) (string, error) {
	name := strings.TrimPrefix(strings.ReplaceAll(raw, "\\", "/"), "./")
	if name == "" {
		return ".", nil
	}
	if strings.HasPrefix(name, "/") {
		return "", &EntryError{Path: raw, Reason: "is an absolute name"}
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if part == ".." {
			return "", &EntryError{Path: raw, Reason: `has a ".." in its name`}
		}
	}
	return path.Clean(name), nil
}

func linkTarget(name, to string) error {
	switch {
	case to == "" || strings.HasPrefix(to, "/"):
		return &EntryError{Path: name, Reason: fmt.Sprintf("is a symbolic link to %q, an absolute path", to)}
	case len(to) > 4096:
		return &EntryError{Path: name, Reason: "is a symbolic link with a target longer than 4096 bytes"}
	}
	resolved := path.Join(path.Dir(name), to)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return &EntryError{Path: name, Reason: fmt.Sprintf("is a symbolic link to %q, outside the artifact", to)}
	}
	return nil
}

// linkOnWay returns the first link that the target to of the link name
// passes through or names, walking its components as the kernel does.
func linkOnWay(links map[string]string, name, to string) string {
	at := path.Dir(name)
	for _, part := range strings.Split(to, "/") {
		switch part {
		case "", ".":
			continue
		case "..":
			at = path.Dir(at)
			continue
		}
		at = path.Join(at, part)
		if _, ok := links[at]; ok {
			return at
		}
	}
	return ""
}

func writeFile(target string, r io.Reader, h *tar.Header) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if h.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	// The header's size bounds the copy: tar reads no more than it.
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("the layer is cut short at %s: %w", h.Name, err)
	}
	return f.Close()
}
