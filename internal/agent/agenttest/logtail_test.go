package agenttest

import (
	"fmt"
	"strings"
	"testing"
)

// A failed test prints the end of its agent's log: the last lines, whole,
// however the writes split them.
func TestLogTailKeepsTheLastLines(t *testing.T) {
	var l logTail
	for i := 0; i < 3*tailLines; i++ {
		line := fmt.Sprintf("line %d\n", i)
		// Written in two parts, as a logger may.
		if _, err := l.Write([]byte(line[:3])); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Write([]byte(line[3:])); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Write([]byte("unfinished")); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(l.String(), "\n")
	if len(got) != tailLines+1 || got[0] != fmt.Sprintf("line %d", 2*tailLines) || got[tailLines-1] != fmt.Sprintf("line %d", 3*tailLines-1) || got[tailLines] != "unfinished" {
		t.Errorf("the tail is %d lines, from %q to %q; want %d lines from %q, then the unfinished one", len(got), got[0], got[len(got)-1], tailLines+1, fmt.Sprintf("line %d", 2*tailLines))
	}
}
