package main

import (
	"os"
	"os/exec"
	"testing"
)

// The agent process's CPU time is read from /proc: a process that has
// computed for a while has some, and no more than the time it has run.
func TestAgentProcessCPUTimeIsReadFromProc(t *testing.T) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := &agentProcess{cmd: &exec.Cmd{Process: self}}
	before, err := p.cpu()
	if err != nil {
		t.Fatal(err)
	}
	x, after := 0, before
	for round := 0; after <= before; round++ {
		if round == 1000 {
			t.Fatalf("the CPU time read stayed %.2f s over 1000 rounds of computing", before)
		}
		for i := range 10_000_000 {
			x ^= i
		}
		if after, err = p.cpu(); err != nil {
			t.Fatal(err)
		}
	}
	_ = x
}
