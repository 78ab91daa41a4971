package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTheREADMELayoutNamesEveryPackageOfInternal keeps README.md's
// layout, the map a newcomer reads first, true to the tree: every package
// under internal/ has a line of its own (its path first), and every
// internal/ path the layout names is a package or a folder of them.
func TestTheREADMELayoutNamesEveryPackageOfInternal(t *testing.T) {
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Layout\n")
	_, block, ok2 := strings.Cut(section, "```\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no ## Layout section with a ``` block")
	}
	var named []string
	for _, line := range strings.Split(block, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "internal/") {
			named = append(named, strings.TrimSuffix(f[0], "/"))
		}
	}

	var packages []string
	err = filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return filepath.SkipDir
		}
		goFiles, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil || len(goFiles) == 0 {
			return err
		}
		rel, err := filepath.Rel(root, path)
		packages = append(packages, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range packages {
		if !slices.Contains(named, pkg) {
			t.Errorf("README.md's layout does not name %s/: add a line saying what it is for", pkg)
		}
	}
	for _, name := range named {
		// A line may name a folder of packages (internal/image/).
		parent := slices.ContainsFunc(packages, func(pkg string) bool { return strings.HasPrefix(pkg, name+"/") })
		if !slices.Contains(packages, name) && !parent {
			t.Errorf("README.md's layout names %s/, which is neither a package of internal/ nor a folder of them: remove or rename its line", name)
		}
	}
}
