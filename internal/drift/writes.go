package drift

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Writes remembers, for each object the agent wrote, the resourceVersion
// its last write returned. That is how the agent tells its own writes from
// anyone else's: a field manager's name is anyone's to use (kubectl apply
// --field-manager=driftless), a resourceVersion the API server returned to
// the agent's own request is not. It holds one entry per object, keyed by
// UID, so it is bounded by the objects the agent manages; Forget drops an
// object that left (deleted, or no longer labelled). Safe for concurrent
// use.
type Writes struct {
	mu   sync.Mutex
	last map[types.UID]string
}

// NewWrites returns an empty record.
func NewWrites() *Writes { return &Writes{last: map[types.UID]string{}} }

// Wrote records that the agent's write of the object uid returned
// resourceVersion. An empty uid or resourceVersion (a dry run) is ignored.
func (w *Writes) Wrote(uid types.UID, resourceVersion string) {
	if w == nil || uid == "" || resourceVersion == "" {
		return
	}
	w.mu.Lock()
	w.last[uid] = resourceVersion
	w.mu.Unlock()
}

// Ours reports whether resourceVersion is the one the agent's last write
// of the object uid returned: the object is as the agent left it.
func (w *Writes) Ours(uid types.UID, resourceVersion string) bool {
	if w == nil || uid == "" || resourceVersion == "" {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[uid] == resourceVersion
}

// Forget drops the object uid.
func (w *Writes) Forget(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.last, uid)
	w.mu.Unlock()
}

// Len returns how many objects are remembered.
func (w *Writes) Len() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.last)
}
