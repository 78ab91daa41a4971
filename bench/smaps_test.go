package main

import (
	"os"
	"strings"
	"testing"
)

// The idle breakdown sums the binary's mappings by what they hold: code,
// read-only data, data; and the anonymous memory apart.
func TestSmapsAreSummedByKindOfMapping(t *testing.T) {
	const smaps = `00400000-02000000 r-xp 00000000 08:01 12 /usr/bin/driftless
Rss:               20480 kB
Pss:               10240 kB
Shared_Clean:      10240 kB
Private_Clean:     10240 kB
FilePmdMapped:      4096 kB
02000000-04000000 r--p 01c00000 08:01 12 /usr/bin/driftless
Rss:                8192 kB
Pss:                8192 kB
Private_Clean:      8192 kB
FilePmdMapped:         0 kB
04000000-04100000 rw-p 03c00000 08:01 12 /usr/bin/driftless
Rss:                1024 kB
Pss:                1024 kB
Private_Clean:       512 kB
Private_Dirty:       512 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Rss:               16384 kB
Pss:               16384 kB
Private_Dirty:     16384 kB
7ffd0000-7ffd2000 rw-p 00000000 00:00 0                          [stack]
Rss:                 132 kB
7fff0000-7fff2000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
`
	ms, err := parseSmaps(strings.NewReader(smaps), "/usr/bin/driftless")
	if err != nil {
		t.Fatal(err)
	}
	got := formatMappings(ms)
	want := "text 20.0 (file 20.0, in 2 MiB pages 4.0), rodata 8.0 (file 8.0, in 2 MiB pages 0.0), data 1.0 (file 0.5, in 2 MiB pages 0.0), anon 16.0, stack 0.1, other 0.0"
	if got != want {
		t.Errorf("breakdown:\n got %s\nwant %s", got, want)
	}
	// This process's own smaps read without error, its code resident.
	self, err := readSmaps(os.Getpid())
	if err != nil || self[0].Kind != "text" || self[0].Rss == 0 {
		t.Errorf("readSmaps(self) = %+v, %v", self, err)
	}
}
