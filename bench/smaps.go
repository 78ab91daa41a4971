package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// mapping is what one kind of the agent process's mappings holds resident,
// from /proc/<pid>/smaps, in MiB.
type mapping struct {
	// Kind is "text" (the binary's code), "rodata" (its read-only data:
	// .rodata, .gopclntab, type links), "data" (its .data and .bss),
	// "anon" (anonymous: the Go heap, its metadata and goroutine stacks),
	// "stack" (the main thread's stack) or "other".
	Kind string  `json:"kind"`
	Rss  float64 `json:"rss_mib"`
	Pss  float64 `json:"pss_mib"`
	// File is the file-backed part of Rss (the mapping's pages that are
	// the binary's page cache, not copies), and Pmd the part of it mapped
	// 2 MiB at a time (FilePmdMapped: a large folio of the page cache).
	File float64 `json:"file_mib"`
	Pmd  float64 `json:"file_pmd_mib"`
}

// mappingKinds is the order a breakdown lists the kinds in.
var mappingKinds = []string{"text", "rodata", "data", "anon", "stack", "other"}

// readSmaps reads /proc/<pid>/smaps and sums it by kind of mapping.
func readSmaps(pid int) ([]mapping, error) {
	bin, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseSmaps(f, bin)
}

// parseSmaps sums the smaps of a process whose executable is bin by kind
// of mapping, in mappingKinds' order.
func parseSmaps(r io.Reader, bin string) ([]mapping, error) {
	sums := map[string]*mapping{}
	for _, k := range mappingKinds {
		sums[k] = &mapping{Kind: k}
	}
	var cur *mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		// A mapping's header: "start-end perms offset dev inode [path]".
		if strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") && len(fields) >= 5 {
			perms, path := fields[1], ""
			if len(fields) >= 6 {
				path = strings.Join(fields[5:], " ")
			}
			cur = sums[mappingKind(perms, path, bin)]
			continue
		}
		if cur == nil || len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		mib := kb / 1024
		switch fields[0] {
		case "Rss:":
			cur.Rss += mib
		case "Pss:":
			cur.Pss += mib
		case "Shared_Clean:", "Private_Clean:":
			// Clean pages of a file mapping are its page cache.
			if cur.Kind == "text" || cur.Kind == "rodata" || cur.Kind == "data" {
				cur.File += mib
			}
		case "FilePmdMapped:":
			cur.Pmd += mib
		}
	}
	out := make([]mapping, 0, len(mappingKinds))
	for _, k := range mappingKinds {
		out = append(out, *sums[k])
	}
	return out, sc.Err()
}

// mappingKind names the kind of a mapping from its permissions and path.
func mappingKind(perms, path, bin string) string {
	switch {
	case path == bin || strings.TrimSuffix(path, " (deleted)") == bin:
		switch {
		case strings.Contains(perms, "x"):
			return "text"
		case strings.Contains(perms, "w"):
			return "data"
		default:
			return "rodata"
		}
	case path == "[stack]":
		return "stack"
	case path == "" || path == "[heap]":
		return "anon"
	default:
		return "other"
	}
}

// formatMappings is a breakdown on one line: "text 30.1 (file 30.1, 2 MiB
// pages 28.0), …".
func formatMappings(ms []mapping) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		if m.Rss == 0 {
			continue
		}
		s := fmt.Sprintf("%s %.1f", m.Kind, m.Rss)
		if m.File > 0 {
			s += fmt.Sprintf(" (file %.1f, in 2 MiB pages %.1f)", m.File, m.Pmd)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// dropPageCache asks the kernel to drop the file's pages from its page
// cache (posix_fadvise DONTNEED; pages a process maps stay), so that the
// process started next reads the binary from disk as a new node does.
// Otherwise its file-backed RSS depends on how the file came into the page
// cache: written by go build or cp, or read before, it was held in large
// folios (mapped 2 MiB at a time) or not, up to 18 MiB apart for two files
// of nearly the same code (docs/performance.md, round 3 memory).
func dropPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // dirty pages are not dropped
		return err
	}
	const fadvDontNeed = 4
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return fmt.Errorf("posix_fadvise %s: %w", path, errno)
	}
	return nil
}
