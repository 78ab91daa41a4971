package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StateStore keeps what the dispatcher needs to remember across agent
// restarts: which Syncs are failing, with what (a fingerprint, never the
// message), since when and when it was last sent, and the last commit
// status sent per Sync. Load returns nil when nothing was saved.
type StateStore interface {
	Load(ctx context.Context) ([]byte, error)
	Save(ctx context.Context, data []byte) error
}

// MaxPersisted bounds the failing Syncs and the commit statuses saved:
// the most recently sent are kept (well within a ConfigMap's 1 MiB).
const MaxPersisted = 2000

// snapshot is the saved state, as JSON.
type snapshot struct {
	Failing  []failingState `json:"failing,omitempty"`
	Statuses []statusState  `json:"statuses,omitempty"`
}

type failingState struct {
	Sync     string    `json:"sync"` // namespace/name
	Key      string    `json:"key"`  // fingerprint of event, reason, message
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	LastSent time.Time `json:"lastSent"`
}

type statusState struct {
	Sync     string      `json:"sync"`
	Revision string      `json:"revision"`
	State    CommitState `json:"state"`
	Sent     time.Time   `json:"sent,omitzero"`
}

func parseKey(s string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}

// snapshot returns the state worth saving, bounded by MaxPersisted.
func (d *Dispatcher) snapshot() ([]byte, error) {
	var s snapshot
	for k, st := range d.dedup.syncs {
		if st.failing {
			s.Failing = append(s.Failing, failingState{Sync: k.String(), Key: st.failKey, Reason: st.failReason,
				Since: st.failSince.UTC(), LastSent: st.lastSent.UTC()})
		}
	}
	slices.SortFunc(s.Failing, func(a, b failingState) int {
		if c := b.LastSent.Compare(a.LastSent); c != 0 {
			return c
		}
		return strings.Compare(a.Sync, b.Sync)
	})
	s.Failing = s.Failing[:min(len(s.Failing), MaxPersisted)]
	for k, m := range d.status {
		s.Statuses = append(s.Statuses, statusState{Sync: k.String(), Revision: m.revision, State: m.last, Sent: m.sent.UTC()})
	}
	slices.SortFunc(s.Statuses, func(a, b statusState) int {
		if c := b.Sent.Compare(a.Sent); c != 0 {
			return c
		}
		return strings.Compare(a.Sync, b.Sync)
	})
	s.Statuses = s.Statuses[:min(len(s.Statuses), MaxPersisted)]
	return json.Marshal(s)
}

// restore takes the saved state in, as if the agent had sent it.
func (d *Dispatcher) restore(data []byte, now time.Time) error {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	for _, f := range s.Failing {
		k, ok := parseKey(f.Sync)
		if !ok || d.dedup.syncs[k] != nil {
			continue
		}
		d.dedup.syncs[k] = &syncState{failing: true, failKey: f.Key, failReason: f.Reason, failSince: f.Since,
			lastSent: f.LastSent, lastNotice: now, sent: map[string]time.Time{}}
	}
	for _, st := range s.Statuses {
		k, ok := parseKey(st.Sync)
		if !ok || d.status[k] != nil {
			continue
		}
		d.status[k] = &statusMemo{revision: st.Revision, last: st.State, sent: st.Sent}
	}
	return nil
}

// persist loads the saved state before the first notice (so that a new
// leader reads what the last one saved) and saves it when it changed.
type persist struct {
	store  StateStore
	loaded bool
	saved  []byte
}

// load reads the saved state once; a failure is logged and the state
// starts empty (a failure may then be sent once more).
func (d *Dispatcher) load(ctx context.Context) {
	p := d.persist
	if p == nil || p.loaded {
		return
	}
	p.loaded = true
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	data, err := p.store.Load(ctx)
	if err == nil && len(data) > 0 {
		err = d.restore(data, d.opts.Clock.Now())
	}
	if err != nil {
		d.log.Error(err, "cannot read the saved notification state; open failures may be sent once more")
	}
}

// save writes the state if it was loaded (a replica that never handled a
// notice does not overwrite the leader's) and changed since last saved.
func (d *Dispatcher) save(ctx context.Context) {
	p := d.persist
	if p == nil || !p.loaded {
		return
	}
	data, err := d.snapshot()
	if err != nil || bytes.Equal(data, p.saved) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	if err := p.store.Save(ctx, data); err != nil {
		d.log.Error(err, "cannot save the notification state; it is tried again at the next change")
		return
	}
	p.saved = data
}

// ConfigMapState keeps the state in one ConfigMap, key "state.json".
type ConfigMapState struct {
	// Reader reads the ConfigMap from the API server (not a cache).
	Reader client.Reader
	// Writer creates and updates it.
	Writer client.Client
	Key    types.NamespacedName
}

// StateKey is the data key of the ConfigMap.
const StateKey = "state.json"

// Load implements StateStore.
func (c *ConfigMapState) Load(ctx context.Context) ([]byte, error) {
	var cm corev1.ConfigMap
	if err := c.Reader.Get(ctx, c.Key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read ConfigMap %s: %w", c.Key, err)
	}
	return []byte(cm.Data[StateKey]), nil
}

// Save implements StateStore.
func (c *ConfigMapState) Save(ctx context.Context, data []byte) error {
	var cm corev1.ConfigMap
	err := c.Reader.Get(ctx, c.Key, &cm)
	if apierrors.IsNotFound(err) {
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Key.Namespace, Name: c.Key.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "driftless"}}, Data: map[string]string{StateKey: string(data)}}
		if err := c.Writer.Create(ctx, &cm); err != nil {
			return fmt.Errorf("create ConfigMap %s: %w", c.Key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s: %w", c.Key, err)
	}
	cm.Data = map[string]string{StateKey: string(data)}
	if err := c.Writer.Update(ctx, &cm); err != nil {
		return fmt.Errorf("update ConfigMap %s: %w", c.Key, err)
	}
	return nil
}
