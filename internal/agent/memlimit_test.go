package agent

import (
	"io/fs"
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
