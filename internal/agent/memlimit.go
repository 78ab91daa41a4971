package agent

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the share of the container's memory limit that the
// agent gives the Go runtime as its soft limit: the rest is for the
// binary's pages, git and the kernel's buffers.
const memoryLimitShare = 0.9

// cgroupLimitFiles are the container's memory limit, cgroup v2 then v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// softMemoryLimit returns the Go runtime's soft memory limit for a
// container limited to what read finds in cgroupLimitFiles:
// memoryLimitShare of it, or false when there is no limit ("max", or v1's
// near-2^63 "unlimited") or no cgroup file.
func softMemoryLimit(read func(string) ([]byte, error)) (int64, bool) {
	for _, f := range cgroupLimitFiles {
		data, err := read(f)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || limit <= 0 || limit >= 1<<60 {
			return 0, false // "max", or unlimited
		}
		return int64(float64(limit) * memoryLimitShare), true
	}
	return 0, false
}

// setSoftMemoryLimit sets the Go runtime's soft memory limit from the
// container's, unless GOMEMLIMIT sets it already; it returns the limit
// set, 0 for none. Without it the heap may grow to twice what is live
// before a collection (GOGC=100), and the agent be killed at its limit
// with half of that garbage.
func setSoftMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit, ok := softMemoryLimit(os.ReadFile)
	if !ok {
		return 0
	}
	debug.SetMemoryLimit(limit)
	return limit
}

// gcPercent is the agent's GOGC when the environment sets none: the heap
// may grow to 1.5 times what is live before a collection, not twice. At
// 10,100 objects in one Sync, what is live during its first sync (the
// render, its JSON and the plan) is about 76 MiB, and GOGC=100 let the
// heap reach 150 MiB (docs/performance.md, round 3 memory). The agent
// waits on the API server far more than it computes, so the collections
// this adds cost little of its time.
const gcPercent = 50

// agentGCPercent returns the GOGC the agent runs with: gcPercent, unless
// the environment's GOGC (read by getenv) is set, which the runtime has
// applied already; set says whether the agent is to set it.
func agentGCPercent(getenv func(string) string) (percent int, set bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return gcPercent, true
}

// setGCPercent sets the Go runtime's GOGC to agentGCPercent and returns
// it, or 0 when the environment's GOGC stands.
func setGCPercent() int {
	percent, ok := agentGCPercent(os.Getenv)
	if !ok {
		return 0
	}
	debug.SetGCPercent(percent)
	return percent
}
