package oci_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/driftless/driftless/internal/source/oci"
)

// An agent that crashed between Remove's rename and its delete, or in the
// middle of an extraction, leaves directories no one reads; the cache
// bound's next pass deletes them, but never an extraction under way nor
// an artifact.
func TestSweepDeletesWhatACrashLeftAndNothingInUse(t *testing.T) {
	dir := t.TempDir()
	artifact := filepath.Join(dir, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	taken := filepath.Join(dir, ".remove-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdee")
	abandoned := filepath.Join(dir, ".extract-111")
	underWay := filepath.Join(dir, ".extract-222")
	for _, d := range []string{artifact, taken, abandoned, underWay} {
		if err := os.MkdirAll(filepath.Join(d, "app"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "app", "web.yaml"), []byte("kind: ConfigMap\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	old := now.Add(-2 * time.Hour)
	if err := os.Chtimes(abandoned, old, old); err != nil {
		t.Fatal(err)
	}
	store := &oci.Store{Dir: dir}
	if n := store.Sweep(now); n != 2 {
		t.Errorf("Sweep deleted %d directories, want 2 (the taken-away artifact and the abandoned extraction)", n)
	}
	for _, d := range []string{taken, abandoned} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", filepath.Base(d), err)
		}
	}
	for _, d := range []string{artifact, underWay} {
		if _, err := os.Stat(filepath.Join(d, "app", "web.yaml")); err != nil {
			t.Errorf("%s was touched: %v", filepath.Base(d), err)
		}
	}
	if got := len(store.Entries()); got != 1 {
		t.Errorf("the store lists %d artifacts after Sweep, want 1", got)
	}
}
