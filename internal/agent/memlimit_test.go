package agent

import (
	"io/fs"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestTheAgentTakesItsSoftMemoryLimitFromTheContainer(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  int64
		set   bool
	}{
		{"a cgroup v2 limit of 512Mi gives 90% of it", map[string]string{"/sys/fs/cgroup/memory.max": "536870912\n"}, 483183820, true},
		{"a cgroup v1 limit is read when there is no v2 file", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n"}, 241591910, true},
		{"no limit in cgroup v2 sets none", map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, 0, false},
		{"cgroup v1's unlimited sets none", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"outside a container nothing is set", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if v, ok := tt.files[name]; ok {
					return []byte(v), nil
				}
				return nil, fs.ErrNotExist
			}
			got, set := softMemoryLimit(read)
			if got != tt.want || set != tt.set {
				t.Errorf("soft limit is %d (set %v), want %d (set %v)", got, set, tt.want, tt.set)
			}
		})
	}
}

func TestTheAgentCollectsAtHalfTheLiveHeapUnlessGOGCIsSet(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  string
		want int
		set  bool
	}{
		{"no GOGC: the agent sets 50", "", 50, true},
		{"GOGC=200 stands", "200", 0, false},
		{"GOGC=off stands", "off", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, set := agentGCPercent(func(k string) string {
				if k == "GOGC" {
					return tt.env
				}
				return ""
			})
			if got != tt.want || set != tt.set {
				t.Errorf("GOGC %d (set %v), want %d (set %v)", got, set, tt.want, tt.set)
			}
		})
	}

	// What the runtime runs with, as the agent's go_gc_gogc_percent
	// metric reports it.
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	if got := setGCPercent(); got != 50 {
		t.Errorf("setGCPercent() = %d, want 50", got)
	}
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	if got := sample[0].Value.Uint64(); got != 50 {
		t.Errorf("the runtime's GOGC is %d after the agent set it, want 50", got)
	}
}
