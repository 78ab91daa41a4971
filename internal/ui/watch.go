package ui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/driftless/driftless/api/v1alpha1"
)

// clientOptions are what every client of a cluster shares.
type clientOptions struct {
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper
}

// clusterState is one cluster: a client as the viewer (local mode) or as
// the dashboard itself (in-cluster mode, where requests act as their
// viewer through auth), and the Syncs a watch keeps up to date.
type clusterState struct {
	name    string
	client  client.WithWatch
	host    string
	cache   cache.Cache
	hub     *hub
	options clientOptions
	// auth, in the in-cluster mode, reviews viewers and makes their
	// clients.
	auth *authenticator

	// newEventsCache makes the cache of the Events of Syncs.
	newEventsCache func() (cache.Cache, error)

	mu sync.RWMutex
	// listed is closed once the first list answered or failed.
	listed     chan struct{}
	listedOnce sync.Once
	// err is why the cluster's Syncs could not be listed.
	err error
	// events holds the Events of Syncs once watched; nil while they are
	// not (the viewer may not list them cluster-wide), when each render
	// lists them.
	events cache.Cache
}

func newClusterState(c Cluster, h *hub) (*clusterState, error) {
	scheme := v1alpha1.NewScheme()
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return nil, fmt.Errorf("context %s: connect to the API server %s: %w", c.Name, c.Config.Host, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(c.Config, hc)
	if err != nil {
		return nil, fmt.Errorf("context %s: connect to the API server %s: %w", c.Name, c.Config.Host, err)
	}
	cl, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("context %s: connect to the API server %s: %w", c.Name, c.Config.Host, err)
	}
	ca, err := cache.New(c.Config, cache.Options{Scheme: scheme, Mapper: mapper, HTTPClient: hc, ByObject: map[client.Object]cache.ByObject{
		&v1alpha1.Sync{}: {},
	}})
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", c.Name, err)
	}
	newEventsCache := func() (cache.Cache, error) {
		return cache.New(c.Config, cache.Options{Scheme: scheme, Mapper: mapper, HTTPClient: hc, ByObject: map[client.Object]cache.ByObject{
			&eventsv1.Event{}: {Field: syncEvents},
		}})
	}
	return &clusterState{name: c.Name, client: cl, host: c.Config.Host, cache: ca, newEventsCache: newEventsCache, hub: h,
		options: clientOptions{Scheme: scheme, Mapper: mapper}, listed: make(chan struct{})}, nil
}

// retry bounds the pause between two lists of a cluster whose Syncs
// could not be listed: it doubles from the first to the last.
var retry = struct{ first, last time.Duration }{time.Second, 30 * time.Second}

// run lists the cluster's Syncs, within timeout, to learn whether the
// viewer may: when that fails, the cluster is shown with the error and
// listed again after a pause that doubles up to retry.last, until it
// answers. Then it watches them (one watch, never a poll) until ctx
// ends, telling the hub of every change.
func (c *clusterState) run(ctx context.Context, timeout time.Duration, now func() time.Time) {
	defer c.hub.notify()
	pause := retry.first
	var since time.Time
	for {
		probe, cancel := context.WithTimeout(ctx, timeout)
		var list v1alpha1.SyncList
		err := c.client.List(probe, &list, client.Limit(1))
		cancel()
		if err == nil {
			break
		}
		if since.IsZero() {
			since = now()
		}
		c.fail(failedSince(since, fmt.Errorf("list Syncs in the cluster at %s: %w", c.host, err)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, retry.last)
	}
	inf, err := c.cache.GetInformer(ctx, &v1alpha1.Sync{})
	if err != nil {
		c.fail(err)
		return
	}
	if _, err := inf.AddEventHandler(c.notifier()); err != nil {
		c.fail(err)
		return
	}
	go func() { _ = c.cache.Start(ctx) }()
	if !c.cache.WaitForCacheSync(ctx) {
		c.fail(fmt.Errorf("watch Syncs in the cluster at %s: %w", c.host, ctx.Err()))
		return
	}
	c.mu.Lock()
	c.err = nil
	c.mu.Unlock()
	c.markListed()
	c.hub.notify()
	c.watchEvents(ctx, timeout)
}

// failedSince says since when a cluster fails: refused (the API server
// answered) or unreachable, and that it is being retried.
func failedSince(since time.Time, err error) error {
	state := "unreachable"
	var api apierrors.APIStatus
	if errors.As(err, &api) {
		state = "refused"
	}
	return fmt.Errorf("%s since %s, retrying: %w", state, since.UTC().Format("2006-01-02 15:04:05 UTC"), err)
}

// syncEvents selects the Events about Syncs.
var syncEvents = fields.OneTermEqualSelector("regarding.kind", v1alpha1.SyncKind)

// watchEvents watches the Events about Syncs (a second watch), telling
// the hub of each, when the viewer may list them cluster-wide; else
// pages list a Sync's Events as they render.
func (c *clusterState) watchEvents(ctx context.Context, timeout time.Duration) {
	probe, cancel := context.WithTimeout(ctx, timeout)
	err := c.client.List(probe, &eventsv1.EventList{}, client.Limit(1), client.MatchingFieldsSelector{Selector: syncEvents})
	cancel()
	if err != nil {
		return
	}
	ca, err := c.newEventsCache()
	if err != nil {
		return
	}
	inf, err := ca.GetInformer(ctx, &eventsv1.Event{})
	if err != nil {
		return
	}
	if _, err := inf.AddEventHandler(c.notifier()); err != nil {
		return
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return
	}
	c.mu.Lock()
	c.events = ca
	c.mu.Unlock()
	c.hub.notify()
}

// notifier tells the hub of every change an informer sees.
func (c *clusterState) notifier() toolscache.ResourceEventHandler {
	notify := func(any) { c.hub.notify() }
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, _ any) { c.hub.notify() },
		DeleteFunc: notify,
	}
}

// clientFor is the client of the request of ctx: in the in-cluster
// mode, one impersonating its viewer; else the context's own.
func (c *clusterState) clientFor(ctx context.Context) (client.Client, error) {
	v := viewerOf(ctx)
	if v == nil || c.auth == nil {
		return c.client, nil
	}
	return c.auth.clientAs(v, c.options)
}

// eventReader is where a Sync's Events are read: the watch's cache, or
// the API server; in the in-cluster mode, always the API server as the
// viewer (the watch only says when to look).
func (c *clusterState) eventReader(ctx context.Context) (client.Reader, error) {
	if viewerOf(ctx) != nil && c.auth != nil {
		return c.clientFor(ctx)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.events != nil {
		return c.events, nil
	}
	return c.client, nil
}

// fail records why the cluster's Syncs cannot be shown, and that the
// first list is over.
func (c *clusterState) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	c.markListed()
	c.hub.notify()
}

// markListed closes listed, once.
func (c *clusterState) markListed() {
	c.listedOnce.Do(func() { close(c.listed) })
}

// syncs returns the cluster's Syncs, waiting for the first list; the
// error says why there are none to show.
func (c *clusterState) syncs(ctx context.Context) ([]v1alpha1.Sync, error) {
	select {
	case <-c.listed:
	case <-ctx.Done():
		return nil, fmt.Errorf("the cluster at %s has not answered yet", c.host)
	}
	c.mu.RLock()
	err := c.err
	c.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	var list v1alpha1.SyncList
	if err := c.cache.List(ctx, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// sync returns one Sync from the watch's cache.
func (c *clusterState) sync(ctx context.Context, key client.ObjectKey) (*v1alpha1.Sync, error) {
	items, err := c.syncs(ctx)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if items[i].Namespace == key.Namespace && items[i].Name == key.Name {
			return &items[i], nil
		}
	}
	return nil, nil
}

// hub tells every live page that something changed: each waiter holds
// the channel of the moment it looked, closed at the next change.
type hub struct {
	mu      sync.Mutex
	changed chan struct{}
}

func newHub() *hub { return &hub{changed: make(chan struct{})} }

// wait returns a channel closed at the next change.
func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

func (h *hub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.changed)
	h.changed = make(chan struct{})
}
