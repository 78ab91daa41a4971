package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Options tune delivery. Zero fields take DefaultOptions' values.
type Options struct {
	// Clock gives the time of dedup decisions and back-off waits.
	Clock clock.WithTicker
	// QueueSize bounds the events waiting for the dispatcher, and the
	// messages waiting for each target; what does not fit is dropped and
	// counted (driftless_notifications_dropped_total).
	QueueSize int
	// Attempts is how often a message is tried before it is given up
	// (on 5xx, 429, timeouts and connection errors; a 4xx is not retried).
	Attempts int
	// Backoff is the wait after the first failed attempt, doubled after
	// each one up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt.
	Timeout time.Duration
	// FlushEvery is how often gathered drift reverts and flap endings are
	// checked.
	FlushEvery time.Duration
	// Client sends the requests.
	Client *http.Client
	// State, when set, keeps the dedup state across restarts: read
	// before the first event is handled, written at most every
	// FlushEvery when it changed, and when the dispatcher stops.
	State StateStore
}

// DefaultOptions returns the defaults: a queue of 256, 5 attempts from
// 2 s back-off up to 1 min, 10 s per attempt.
func DefaultOptions() Options {
	return Options{Clock: clock.RealClock{}, QueueSize: 256, Attempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute,
		Timeout: 10 * time.Second, FlushEvery: 5 * time.Second, Client: &http.Client{}}
}

var (
	notificationsSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftless_notifications_total",
		Help: "Notifications by target and result (sent, failed: given up after retries or refused).",
	}, []string{"target", "result"})
	notificationsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "driftless_notifications_dropped_total",
		Help: "Events or messages dropped because a notification queue was full.",
	})
)

func init() {
	metrics.Registry.MustRegister(notificationsSent, notificationsDropped)
}

// Dispatcher turns Sync events into notifications. It is a manager
// Runnable; events recorded before it starts wait in its queue.
type Dispatcher struct {
	cfg     Config
	opts    Options
	in      chan notice
	dedup   *deduper
	status  map[types.NamespacedName]*statusMemo
	senders []*sender
	dropped atomic.Int64
	log     logr.Logger
	persist *persist
}

// NewDispatcher returns a dispatcher for the targets of cfg, which must
// come from LoadConfig (or have been completed the same way).
func NewDispatcher(cfg Config, opts Options) *Dispatcher {
	def := DefaultOptions()
	if opts.Clock == nil {
		opts.Clock = def.Clock
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = def.QueueSize
	}
	if opts.Attempts <= 0 {
		opts.Attempts = def.Attempts
	}
	if opts.Backoff <= 0 {
		opts.Backoff = def.Backoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = def.MaxBackoff
	}
	if opts.Timeout <= 0 {
		opts.Timeout = def.Timeout
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = def.FlushEvery
	}
	if opts.Client == nil {
		opts.Client = def.Client
	}
	if cfg.Cluster == "" {
		cfg.Cluster = DefaultCluster
	}
	d := &Dispatcher{cfg: cfg, opts: opts, in: make(chan notice, opts.QueueSize), dedup: newDeduper(cfg),
		status: map[types.NamespacedName]*statusMemo{}, log: ctrl.Log.WithName("notify")}
	if opts.State != nil {
		d.persist = &persist{store: opts.State}
	}
	for i := range cfg.Targets {
		d.senders = append(d.senders, &sender{target: &cfg.Targets[i], opts: opts, queue: make(chan delivery, opts.QueueSize), d: d})
	}
	return d
}

// Dropped is how many events and messages were dropped on full queues.
func (d *Dispatcher) Dropped() int64 { return d.dropped.Load() }

func (d *Dispatcher) drop() {
	d.dropped.Add(1)
	notificationsDropped.Inc()
}

// enqueue hands n to the dispatcher without ever blocking.
func (d *Dispatcher) enqueue(n notice) {
	select {
	case d.in <- n:
	default:
		d.drop()
	}
}

// NeedLeaderElection is false: only the leader's controllers record
// events, so the other replicas have nothing to send.
func (d *Dispatcher) NeedLeaderElection() bool { return false }

// Start runs until ctx is done. Messages not yet delivered then are lost.
func (d *Dispatcher) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, s := range d.senders {
		wg.Go(func() { s.run(ctx) })
	}
	defer wg.Wait()
	tick := d.opts.Clock.NewTicker(d.opts.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			d.save(context.WithoutCancel(ctx))
			return nil
		case n := <-d.in:
			d.load(ctx)
			if n.status != nil {
				d.routeStatus(*n.status)
				continue
			}
			if n.gone {
				delete(d.status, n.sync)
			}
			d.route(d.dedup.observe(n, d.opts.Clock.Now()))
		case <-tick.C():
			d.route(d.dedup.flush(d.opts.Clock.Now()))
			d.save(ctx)
		}
	}
}

func (d *Dispatcher) route(msgs []Message) {
	for _, m := range msgs {
		for _, s := range d.senders {
			if s.target.status() || !s.target.wants(m.Event, m.Sync.Namespace, m.Labels) {
				continue
			}
			b, err := body(s.target.Type, m)
			if err != nil {
				d.log.Error(err, "notification not worded", "target", s.target.Name, "sync", m.Sync.String())
				continue
			}
			dl := delivery{url: s.target.URL, body: b, sync: m.Sync, event: string(m.Event)}
			if len(s.target.key) > 0 {
				dl.headers = map[string]string{SignatureHeader: Sign(s.target.key, b)}
			}
			s.enqueue(dl)
		}
	}
}

// routeStatus hands n to the commit status targets that select its Sync
// and whose server holds its repository, unless it is not news.
func (d *Dispatcher) routeStatus(n statusNotice) {
	memo := d.status[n.sync]
	if memo == nil {
		memo = &statusMemo{}
		d.status[n.sync] = memo
	}
	if !memo.due(n) {
		return
	}
	memo.sent = d.opts.Clock.Now()
	for _, s := range d.senders {
		if !s.target.status() || !s.target.selects(n.sync.Namespace, n.labels) {
			continue
		}
		dl, err := s.target.statusDelivery(n, d.cfg.Cluster)
		if errors.Is(err, errNotHere) {
			d.log.V(1).Info("no commit status: the Sync's repository is not on the target's server", "target", s.target.Name, "sync", n.sync.String())
			continue
		}
		if err != nil {
			d.log.Error(err, "commit status not worded", "target", s.target.Name, "sync", n.sync.String())
			continue
		}
		s.enqueue(dl)
	}
}

// Syncing tells the commit status targets that s started syncing
// revision, which it has not applied. It never blocks.
func (d *Dispatcher) Syncing(s *v1alpha1.Sync, revision string) {
	n := statusNoticeOf(s, revision, StatePending, "", "")
	d.enqueue(notice{sync: n.sync, status: &n})
}

// Synced tells the commit status targets how the sync of revision
// ended: Ready when reason is empty, else failed with reason; message
// is the Ready condition's (masked); superseded when a newer revision
// arrived before it was Ready. It never blocks.
func (d *Dispatcher) Synced(s *v1alpha1.Sync, revision, reason, message string, superseded bool) {
	state := StateSuccess
	switch {
	case superseded:
		state = StateError
	case reason != "":
		state = StateFailure
	}
	n := statusNoticeOf(s, revision, state, reason, message)
	d.enqueue(notice{sync: n.sync, status: &n})
}

// Held tells the commit status targets that revision, the tip of a held
// Sync's branch, waits for the hold's release: message says the hold
// (who, why, how many commits wait). It never blocks.
func (d *Dispatcher) Held(s *v1alpha1.Sync, revision, message string) {
	n := statusNoticeOf(s, revision, StateHeld, v1alpha1.ReasonHeld, message)
	d.enqueue(notice{sync: n.sync, status: &n})
}

// delivery is one request to a target, worded.
type delivery struct {
	url     string
	body    []byte
	headers map[string]string
	sync    types.NamespacedName
	event   string
	// credential: headers hold an API token, so redirects are not
	// followed (Go keeps headers such as PRIVATE-TOKEN, and Authorization
	// to the same host, across a redirect).
	credential bool
}

// sender delivers one target's messages in order, one at a time.
type sender struct {
	target *Target
	opts   Options
	queue  chan delivery
	d      *Dispatcher
}

func (s *sender) enqueue(dl delivery) {
	select {
	case s.queue <- dl:
	default:
		s.d.drop()
	}
}

func (s *sender) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.queue:
			if err := s.deliver(ctx, m); err != nil {
				notificationsSent.WithLabelValues(s.target.Name, "failed").Inc()
				if ctx.Err() == nil {
					s.d.log.Error(err, "notification not delivered", "target", s.target.Name, "sync", m.sync.String(), "event", m.event)
				}
				continue
			}
			notificationsSent.WithLabelValues(s.target.Name, "sent").Inc()
		}
	}
}

// errFinal is a refusal that retrying will not change.
var errFinal = errors.New("refused")

// deliver posts m, retrying with back-off. Its errors never hold the URL.
func (s *sender) deliver(ctx context.Context, dl delivery) error {
	wait := s.opts.Backoff
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, dl)
		if err == nil || errors.Is(err, errFinal) || attempt >= s.opts.Attempts {
			if err != nil {
				return fmt.Errorf("target %s, attempt %d: %w", s.target.Name, attempt, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.opts.Clock.After(wait):
		}
		wait = min(2*wait, s.opts.MaxBackoff)
	}
}

func (s *sender) post(ctx context.Context, dl delivery) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dl.url, bytes.NewReader(dl.body))
	if err != nil {
		return fmt.Errorf("%w: the URL does not make a request", errFinal)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "driftless-notify")
	for k, v := range dl.headers {
		req.Header.Set(k, v)
	}
	client := s.opts.Client
	if dl.credential {
		c := *client
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		client = &c
	}
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error names the URL, which may hold a token.
		var ue *url.Error
		if errors.As(err, &ue) {
			return fmt.Errorf("post failed: %w", ue.Err)
		}
		return errors.New("post failed")
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode < 400:
		// Only requests with a credential get here: the others follow.
		return fmt.Errorf("%w: endpoint answered %s, a redirect, which is not followed because the request carries the target's token: set the target's address to the API's own", errFinal, resp.Status)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("endpoint answered %s", resp.Status)
	default:
		return fmt.Errorf("%w: endpoint answered %s", errFinal, resp.Status)
	}
}

// Recorder is the controllers' event recorder (controller.EventRecorder).
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Wrap returns a recorder that records every event with next and hands
// events about Syncs to d. It never blocks on d.
func Wrap(next Recorder, d *Dispatcher) Recorder {
	return &recorder{next: next, d: d}
}

type recorder struct {
	next Recorder
	d    *Dispatcher
}

func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
	s, ok := regarding.(*v1alpha1.Sync)
	if !ok {
		return
	}
	if n, ok := noticeOf(s, eventtype, reason, action, fmt.Sprintf(note, args...)); ok {
		r.d.enqueue(n)
	}
}
