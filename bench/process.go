package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// memory is this process's memory after a full GC with freed pages
// returned to the OS, so that RSS is comparable between readings.
type memory struct {
	HeapMiB float64 `json:"heap_mib"` // live heap (HeapAlloc)
	RSSMiB  float64 `json:"rss_mib"`  // VmRSS
}

func readMemory() memory {
	debug.FreeOSMemory() // runs a GC first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memory{HeapMiB: mib(ms.HeapAlloc), RSSMiB: rss()}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func rss() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// cpu is CPU time (user + system) used so far by this process and by its
// waited-for children (git upload-pack run by the file:// transport,
// kubectl).
type cpu struct {
	self, children time.Duration
}

func readCPU() cpu {
	return cpu{self: rusage(syscall.RUSAGE_SELF), children: rusage(syscall.RUSAGE_CHILDREN)}
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (c cpu) minus(before cpu) cpu {
	return cpu{self: c.self - before.self, children: c.children - before.children}
}

// cpuSeconds reads the user and system CPU time process pid used so far,
// in seconds, from /proc/<pid>/stat (clock ticks of 1/100 s, Linux's
// USER_HZ).
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and
	// may hold spaces: utime and stime are the 12th and 13th of them.
	_, rest, ok := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: no CPU times in %q", pid, data)
	}
	ticks := 0.0
	for _, f := range fields[11:13] {
		n, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return ticks / 100, nil
}
