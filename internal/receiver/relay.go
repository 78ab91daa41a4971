package receiver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/controller"
)

const (
	// relayKey is the ConfigMap's key holding the notices, as JSON.
	relayKey = "notices"
	// relayKeep bounds the notices the ConfigMap holds: the newest, and
	// none older than relayMaxAge (an agent that was down for longer
	// syncs every Sync as it starts anyway).
	relayKeep   = 32
	relayMaxAge = 10 * time.Minute
)

// Notice is a push notice as the relay passes it on.
type Notice struct {
	// ID tells notices apart, so that each agent acts on each once.
	ID string `json:"id"`
	// From is the shard of the agent that received it ("" for the Syncs
	// without a shard label).
	From string `json:"from"`
	// At is when that agent received it.
	At metav1.Time `json:"at"`
	// Namespace limits the notice to one namespace's Syncs (a tenant's
	// endpoint, /hooks/<provider>/<namespace>); "" for any.
	Namespace    string     `json:"namespace,omitempty"`
	Repositories []string   `json:"repositories,omitempty"`
	Refs         []string   `json:"refs,omitempty"`
	Artifacts    []Artifact `json:"artifacts,omitempty"`
}

func (n Notice) push() Push {
	return Push{Repositories: n.Repositories, Refs: n.Refs, Artifacts: n.Artifacts}
}

// RelayOptions configure a Relay.
type RelayOptions struct {
	// Client reads, writes and watches the relay's ConfigMap (uncached:
	// the manager's cache holds no ConfigMap).
	Client client.WithWatch
	// Namespace is the agent's namespace, where the ConfigMap lives.
	Namespace string
	// Shard is this agent's shard.
	Shard string
	// Syncs lists this agent's Syncs (the manager's cache, which holds
	// the shard's only) to match the notices of other agents against.
	Syncs client.Reader
	// Wake takes the wake-ups, as the receiver's.
	Wake chan<- controller.WakeUp
}

// Relay passes push notices between the agents of a sharded installation
// (agent --shard): Publish writes a notice this agent's receiver took to
// v1alpha1.RelayConfigMap; Start (on the leader of each shard) watches that
// ConfigMap and wakes this agent's Syncs that each other agent's notice
// matches. A Sync is so woken by a push whichever shard's agent the git
// host reached, at the cost of one write per push and one watch per
// agent.
type Relay struct {
	opts RelayOptions
	log  logr.Logger

	mu sync.Mutex
	// seen are the IDs of the notices acted on (or published) here.
	seen map[string]bool
	// since: notices received before are not acted on; the syncs of an
	// agent's start cover them. A notice's time is in whole seconds (it
	// is a metav1.Time in JSON), so since is too: a push in the second
	// this agent started is acted on — one wake-up more for a push a
	// moment before the start is harmless, one lost is not.
	since time.Time
}

var (
	_ manager.Runnable               = (*Relay)(nil)
	_ manager.LeaderElectionRunnable = (*Relay)(nil)
)

// NewRelay returns a Relay; Start watches for other agents' notices.
func NewRelay(opts RelayOptions) (*Relay, error) {
	if opts.Client == nil || opts.Syncs == nil || opts.Wake == nil || opts.Namespace == "" {
		return nil, errors.New("push relay: no client, Sync reader, wake channel or namespace")
	}
	return &Relay{opts: opts, log: ctrl.Log.WithName("push-relay"), seen: map[string]bool{}, since: time.Now().Truncate(time.Second)}, nil
}

// NeedLeaderElection: only the leader's Sync controller reads Wake.
func (r *Relay) NeedLeaderElection() bool { return true }

// Publish passes a push notice this agent received (namespace: the
// tenant endpoint's, or "") to the other agents.
func (r *Relay) Publish(ctx context.Context, p Push, namespace string, at time.Time) error {
	var id [8]byte
	_, _ = rand.Read(id[:])
	n := Notice{ID: hex.EncodeToString(id[:]), From: r.opts.Shard, At: metav1.NewTime(at), Namespace: namespace,
		Repositories: p.Repositories, Refs: p.Refs, Artifacts: p.Artifacts}
	r.mu.Lock()
	r.seen[n.ID] = true
	r.mu.Unlock()
	key := client.ObjectKey{Namespace: r.opts.Namespace, Name: v1alpha1.RelayConfigMap}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := r.opts.Client.Get(ctx, key, &cm)
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "driftless"}}}
			data, err := encodeNotices(keepNotices(nil, n, at))
			if err != nil {
				return err
			}
			cm.Data = map[string]string{relayKey: data}
			err = r.opts.Client.Create(ctx, &cm)
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), key.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		data, err := encodeNotices(keepNotices(decodeNotices(cm.Data[relayKey]), n, at))
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[relayKey] = data
		return r.opts.Client.Update(ctx, &cm)
	})
}

// keepNotices appends n to notices and keeps the newest relayKeep of
// those received within relayMaxAge of now.
func keepNotices(notices []Notice, n Notice, now time.Time) []Notice {
	kept := slices.DeleteFunc(append(notices, n), func(o Notice) bool { return now.Sub(o.At.Time) > relayMaxAge })
	if len(kept) > relayKeep {
		kept = kept[len(kept)-relayKeep:]
	}
	return kept
}

func encodeNotices(notices []Notice) (string, error) {
	b, err := json.Marshal(notices)
	return string(b), err
}

// decodeNotices reads the ConfigMap's notices; what does not parse is
// dropped (the next Publish rewrites it).
func decodeNotices(data string) []Notice {
	var notices []Notice
	if data == "" || json.Unmarshal([]byte(data), &notices) != nil {
		return nil
	}
	return notices
}

// Start watches v1alpha1.RelayConfigMap until ctx is done and wakes the
// Syncs each new notice of another agent matches. A watch that ends is
// started again, listing first, after a second.
func (r *Relay) Start(ctx context.Context) error {
	for {
		if err := r.watch(ctx); err != nil && ctx.Err() == nil {
			r.log.Error(err, "watching push notices of other shards; retrying", "configMap", r.opts.Namespace+"/"+v1alpha1.RelayConfigMap)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// watch lists the ConfigMap, acts on its notices, then follows it.
func (r *Relay) watch(ctx context.Context) error {
	byName := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", v1alpha1.RelayConfigMap)}
	var list corev1.ConfigMapList
	if err := r.opts.Client.List(ctx, &list, client.InNamespace(r.opts.Namespace), byName); err != nil {
		return err
	}
	for i := range list.Items {
		r.act(ctx, &list.Items[i])
	}
	w, err := r.opts.Client.Watch(ctx, &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: list.ResourceVersion}},
		client.InNamespace(r.opts.Namespace), byName, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					r.act(ctx, cm)
				}
			case watch.Error:
				return fmt.Errorf("watch: %v", apierrors.FromObject(ev.Object))
			}
		}
	}
}

// act wakes this agent's Syncs for each notice of cm not acted on yet.
func (r *Relay) act(ctx context.Context, cm *corev1.ConfigMap) {
	notices := decodeNotices(cm.Data[relayKey])
	var fresh []Notice
	r.mu.Lock()
	for _, n := range notices {
		if r.seen[n.ID] {
			continue
		}
		r.seen[n.ID] = true
		if r.current(n) {
			fresh = append(fresh, n)
		}
	}
	if len(r.seen) > 4*relayKeep {
		// Forget what the ConfigMap no longer holds.
		for id := range r.seen {
			if !slices.ContainsFunc(notices, func(n Notice) bool { return n.ID == id }) {
				delete(r.seen, id)
			}
		}
	}
	r.mu.Unlock()
	for _, n := range fresh {
		woken, err := r.wake(ctx, n)
		if err != nil {
			r.log.Error(err, "could not wake Syncs for a push notice of another shard", "from", n.From, "refs", n.Refs)
			continue
		}
		r.log.Info("push relayed from another shard", "from", n.From, "refs", n.Refs, "woken", woken)
	}
}

// current tells whether n was received since this agent started.
func (r *Relay) current(n Notice) bool { return !n.At.Time.Before(r.since) }

// wake hands the Syncs n matches to the Sync controller. Their notice time
// is now, when this agent learnt of it: the receiving agent's clock may
// be ahead of this one's, and an ls-remote that started before it might
// not see the push.
func (r *Relay) wake(ctx context.Context, n Notice) ([]string, error) {
	return wakeMatching(ctx, r.opts.Syncs, r.opts.Wake, n.push(), n.Namespace, time.Now())
}
