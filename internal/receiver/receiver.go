package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/controller"
	"github.com/driftless/driftless/internal/forwarded"
)

// ReasonWebhookRejected is the reason of the Warning event on the webhook
// Secret when a request is refused for its signature, or because the
// Secret lacks the provider's key.
const ReasonWebhookRejected = "WebhookRejected"

// EventRecorder emits events.k8s.io Events; the manager's recorder
// satisfies it.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options configure a Receiver.
type Options struct {
	// Addr is the address to listen on, such as ":9292".
	Addr string
	// Secret names the Secret with the webhook secrets (see secrets).
	Secret types.NamespacedName
	// Syncs lists Syncs to match pushes against: the manager's cached
	// client.
	Syncs client.Reader
	// Secrets reads the webhook Secret: an uncached reader, since the
	// agent's cache holds no unlabelled Secret.
	Secrets client.Reader
	// Wake takes one wake-up per woken Sync, with when its notice
	// arrived; the Sync controller reads it (controller.Options.Wake).
	Wake chan<- controller.WakeUp
	// Elected is closed once this replica leads (manager.Elected); until
	// then requests get 503, since only the leader's controller reads
	// Wake. Nil means elected.
	Elected <-chan struct{}
	// Recorder emits Warning events on the webhook Secret; nil emits none.
	Recorder EventRecorder
	// Limits bound bodies, request rates and memory; the zero value means
	// DefaultLimits.
	Limits Limits
	// TrustedProxies are the addresses of the proxies in front of the
	// receiver (an Ingress controller, a load balancer), as CIDRs. A
	// request from one of them is rate-limited by the sender its
	// X-Forwarded-For names: the rightmost address there that is not a
	// trusted proxy. By default (nil) none is trusted and every request
	// is limited by its TCP peer, since anyone can write X-Forwarded-For;
	// behind a proxy all requests then share the proxy's bucket.
	TrustedProxies []netip.Prefix
	// Relay, when set (a sharded agent: agent --shard), passes each push
	// to the agents of the other shards, whose Syncs this agent does
	// not see; nil wakes this agent's Syncs only.
	Relay *Relay
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Receiver serves the webhook endpoints. It is an http.Handler and a
// manager.Runnable that listens on Options.Addr on every replica.
type Receiver struct {
	opts       Options
	log        logr.Logger
	limiter    *limiter
	deliveries *deliveries
	secrets    *secrets
	tenants    *tenantSecrets

	mu       sync.Mutex
	lastWarn map[string]time.Time
	refused  map[string]int
}

var (
	_ manager.Runnable               = (*Receiver)(nil)
	_ manager.LeaderElectionRunnable = (*Receiver)(nil)
	_ http.Handler                   = (*Receiver)(nil)
)

// New checks opts and returns a Receiver; Start serves it.
func New(opts Options) (*Receiver, error) {
	var errs []error
	if opts.Addr == "" {
		errs = append(errs, errors.New("no listen address"))
	}
	if opts.Secret.Name == "" || opts.Secret.Namespace == "" {
		errs = append(errs, errors.New("no webhook Secret: name the Secret that holds the webhook secrets"))
	}
	if opts.Syncs == nil || opts.Secrets == nil || opts.Wake == nil {
		errs = append(errs, errors.New("no Sync reader, Secret reader or wake channel"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits()
	}
	return &Receiver{
		opts:       opts,
		log:        log.Log.WithName("webhook-receiver"),
		limiter:    newLimiter(opts.Limits),
		deliveries: newDeliveries(opts.Limits.ReplayWindow),
		secrets:    &secrets{reader: opts.Secrets, name: opts.Secret, ttl: opts.Limits.SecretTTL},
		tenants:    &tenantSecrets{reader: opts.Secrets, ttl: opts.Limits.SecretTTL},
		lastWarn:   map[string]time.Time{},
		refused:    map[string]int{},
	}, nil
}

// NeedLeaderElection is false: every replica listens, so that a Service
// in front of them never hits a closed port; a replica that does not lead
// answers 503.
func (r *Receiver) NeedLeaderElection() bool { return false }

// shutdownGrace is how long requests under way may finish once the
// receiver is told to stop.
const shutdownGrace = 10 * time.Second

// Start listens on Options.Addr and serves until ctx is done, then shuts
// down, letting requests under way finish for up to ten seconds.
func (r *Receiver) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", r.opts.Addr)
	if err != nil {
		return fmt.Errorf("webhook receiver: listen on %s: %w", r.opts.Addr, err)
	}
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// Requests do not end with ctx: Shutdown lets them finish.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			// Past the grace, requests still under way are cut off.
			_ = srv.Close()
		}
	}()
	r.log.Info("serving webhooks", "address", ln.Addr().String(), "endpoints", ProviderNames())
	err = srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return fmt.Errorf("webhook receiver on %s: %w", r.opts.Addr, err)
}

// Reply is the JSON body of every answer.
type Reply struct {
	// Message says what was done, or why nothing was.
	Message string `json:"message"`
	// Woken lists the Syncs woken, as namespace/name; empty unless the
	// request was a push that matched.
	Woken []string `json:"woken"`
}

// ServeHTTP answers POST /hooks/<provider>, signed with the agent's
// webhook Secret, which wakes any Sync, and POST
// /hooks/<provider>/<namespace>, signed with the Secret TenantSecretName
// of that namespace, which wakes only that namespace's Syncs. Checks run
// cheapest first, each stage answering and ending the request when it
// fails: route (404, 405), admit (delivery budgets checked, not spent
// (429: the sender's, all addresses'), leadership (503), body size
// (413)), authenticate (signature (401, and a Warning event; 429 past the
// sender's or all addresses' refused budget), then the delivery budgets
// are spent), newPush (replayed delivery (200, ignored), event type (200,
// ignored unless a push)), and wakeFor: payload (400), then the wake-up
// (200 with the Syncs woken, or 503 if the queue could not take them, in
// which case the delivery is forgotten so that a retry is not taken for a
// replay).
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h, ok := r.route(w, req)
	if !ok || !r.admit(w, req, h) || !r.authenticate(w, req, h) || !r.newPush(w, req, h) {
		return
	}
	r.wakeFor(w, req, h)
}

// hook is one request to a webhook endpoint, as the stages of ServeHTTP
// learn it.
type hook struct {
	// name is the provider's endpoint name (github, gitlab, …), p the
	// provider.
	name string
	p    provider
	// namespace is the tenant's whose endpoint was called (tenant), ""
	// for the agent's own endpoint.
	namespace string
	tenant    bool
	// endpoint names the endpoint in logs, events and delivery IDs: name,
	// or name/namespace.
	endpoint string
	// addr is the sender the request is limited and logged by.
	addr string
	// arrived is the wall clock when the request arrived, not opts.Now:
	// what git answered after it is compared with it. now is opts.Now's.
	arrived, now time.Time
	body         []byte
	// delivery is the provider's delivery ID as endpoint/ID, "" when it
	// sends none.
	delivery string
}

// route finds the endpoint of req (404 when there is none, 405 unless
// POST); false once it has answered.
func (r *Receiver) route(w http.ResponseWriter, req *http.Request) (*hook, bool) {
	h := &hook{arrived: time.Now(), now: r.opts.Now()}
	name, _ := strings.CutPrefix(req.URL.Path, "/hooks/")
	h.name, h.namespace, h.tenant = strings.Cut(name, "/")
	var ok bool
	h.p, ok = providers[h.name]
	if !ok || h.tenant && !validNamespace(h.namespace) {
		r.answer(w, "unknown", http.StatusNotFound, "not_found", "no such endpoint: use /hooks/"+strings.Join(ProviderNames(), ", /hooks/")+
			", or /hooks/<provider>/<namespace> with the Secret "+TenantSecretName+" of that namespace")
		return nil, false
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.answer(w, h.name, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return nil, false
	}
	h.endpoint = h.name
	if h.tenant {
		h.endpoint = h.name + "/" + h.namespace
	}
	return h, true
}

// admit checks, before any signature, what costs least: the delivery
// budgets, without spending them (429), leadership (503), and reads the
// body (413 past Limits.MaxBodyBytes); false once it has answered.
func (r *Receiver) admit(w http.ResponseWriter, req *http.Request, h *hook) bool {
	h.addr = r.sender(req)
	if !r.limiter.allow(h.addr, h.now) {
		r.slowDown(w, h.name, "too many requests: slow down")
		return false
	}
	if !r.elected() {
		r.answer(w, h.name, http.StatusServiceUnavailable, "not_leader", "this agent replica does not lead; the leader serves webhooks")
		return false
	}
	body, err := readBody(w, req, r.opts.Limits.MaxBodyBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			r.answer(w, h.name, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is larger than %d bytes", r.opts.Limits.MaxBodyBytes))
			return false
		}
		r.answer(w, h.name, http.StatusBadRequest, "bad_request", "could not read the body")
		return false
	}
	h.body = body
	return true
}

// authenticate checks the signature of the request with the endpoint's
// webhook secret (401 and a Warning event on the Secret when it does not
// match; 503 when the agent's Secret cannot be read; a tenant's namespace
// without one is a 401, so that an unsigned request learns nothing), past
// the sender's budget of refused requests a 429, and then spends the
// delivery budgets (429); false once it has answered.
func (r *Receiver) authenticate(w http.ResponseWriter, req *http.Request, h *hook) bool {
	secrets := r.secrets
	if h.tenant {
		secrets = r.tenants.of(h.namespace, h.now)
	}
	secret, err := secrets.forProvider(req.Context(), h.name, h.now)
	if err != nil && h.tenant {
		// A namespace without the Secret has no endpoint: refused as a
		// bad signature is, so that an unsigned request learns nothing.
		if !r.limiter.refused(h.addr, h.now) {
			r.slowDown(w, h.name, "too many requests that fail the signature check: slow down")
			return false
		}
		r.log.Info("refused a webhook request for a namespace", "endpoint", h.endpoint, "remote", h.addr, "reason", err.Error())
		r.answer(w, h.name, http.StatusUnauthorized, "unauthenticated", "the request is not signed with the webhook secret of namespace "+h.namespace)
		return false
	}
	if err != nil {
		r.log.Error(err, "cannot check a webhook request", "provider", h.name, "remote", h.addr)
		r.warn(secrets.name, h.endpoint, h.now, "refused a request to /hooks/%s from %s: %v", h.endpoint, h.addr, err)
		r.answer(w, h.name, http.StatusServiceUnavailable, "no_secret", "the agent has no webhook secret for "+h.name+": its log and the events on its webhook Secret say what to set")
		return false
	}
	if err := h.p.verify(req.Header, h.body, secret); err != nil {
		if !r.limiter.refused(h.addr, h.now) {
			r.slowDown(w, h.name, "too many requests that fail the signature check: slow down")
			return false
		}
		r.log.Info("refused an unauthenticated webhook request", "endpoint", h.endpoint, "remote", h.addr, "reason", err.Error())
		r.warn(secrets.name, h.endpoint, h.now, "refused a request to /hooks/%s from %s: %v", h.endpoint, h.addr, err)
		msg := "the request is not signed with the webhook secret"
		if h.tenant {
			msg += " of namespace " + h.namespace
		}
		r.answer(w, h.name, http.StatusUnauthorized, "unauthenticated", msg)
		return false
	}
	if !r.limiter.delivered(h.addr, h.now) {
		r.slowDown(w, h.name, "too many requests: slow down")
		return false
	}
	return true
}

// newPush answers a replayed delivery (200, ignored), a ping (200) and
// any event but a push (200, ignored), and remembers the delivery ID of
// the rest; false once it has answered.
func (r *Receiver) newPush(w http.ResponseWriter, req *http.Request, h *hook) bool {
	_, event := first(req.Header, h.p.eventHeaders)
	_, delivery := first(req.Header, h.p.deliveryHeaders)
	if delivery != "" {
		h.delivery = h.endpoint + "/" + truncate(delivery, 128)
		if isFirst, at := r.deliveries.first(h.delivery, h.now); !isFirst {
			r.answer(w, h.name, http.StatusOK, "replayed", fmt.Sprintf("delivery %s was already received %s ago; ignored", strings.TrimPrefix(h.delivery, h.endpoint+"/"), h.now.Sub(at).Round(time.Second)))
			return false
		}
	}
	switch {
	case slices.Contains(h.p.pingEvents, event):
		r.answer(w, h.name, http.StatusOK, "pong", "pong")
		return false
	case len(h.p.eventHeaders) > 0 && !slices.Contains(h.p.pushEvents, event):
		r.answer(w, h.name, http.StatusOK, "ignored", fmt.Sprintf("event %q ignored: only %s events wake Syncs", truncate(event, 64), strings.Join(h.p.pushEvents, ", ")))
		return false
	}
	return true
}

// wakeFor parses the push (400), wakes the Syncs it matches and passes it
// to the other shards' agents (Options.Relay), and answers 200 with the
// Syncs woken. When the push cannot be parsed or passed on (503), its
// delivery ID is forgotten, so that a retry is not taken for a replay.
func (r *Receiver) wakeFor(w http.ResponseWriter, req *http.Request, h *hook) {
	push, err := h.p.parse(h.body)
	if err != nil {
		r.forget(h)
		r.answer(w, h.name, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	woken, err := r.wake(req.Context(), push, h.namespace, h.arrived)
	if err != nil {
		r.forget(h)
		r.log.Error(err, "could not wake Syncs", "provider", h.name, "refs", push.Refs)
		r.answer(w, h.name, http.StatusServiceUnavailable, "unavailable", "could not wake the Syncs; try again")
		return
	}
	if r.opts.Relay != nil {
		if err := r.opts.Relay.Publish(req.Context(), push, h.namespace, h.arrived); err != nil {
			r.forget(h)
			r.log.Error(err, "could not pass a push notice to the other shards", "provider", h.name, "refs", push.Refs, "configMap", v1alpha1.RelayConfigMap)
			r.answer(w, h.name, http.StatusServiceUnavailable, "unavailable", "could not pass the push to the other shards' agents; try again")
			return
		}
	}
	r.log.Info("push received", "endpoint", h.endpoint, "delivery", strings.TrimPrefix(h.delivery, h.endpoint+"/"), "refs", push.Refs, "woken", woken)
	msg, result := fmt.Sprintf("woke %d Sync(s)", len(woken)), "woken"
	if len(woken) == 0 {
		msg, result = "no Sync follows "+strings.Join(push.Refs, ", ")+" of this repository", "no_match"
	}
	if r.opts.Relay != nil {
		// woken are this shard's; the other shards' agents wake theirs.
		msg, result = fmt.Sprintf("woke %d Sync(s) of this shard; passed to the other shards' agents", len(woken)), "woken"
	}
	r.reply(w, h.name, http.StatusOK, Reply{Message: msg, Woken: woken}, result)
}

// forget drops the delivery ID of h, so that the sender's retry of a push
// the receiver could not take is not a replay.
func (r *Receiver) forget(h *hook) {
	if h.delivery != "" {
		r.deliveries.forget(h.delivery)
	}
}

// slowDown answers 429 with Retry-After: 1.
func (r *Receiver) slowDown(w http.ResponseWriter, provider, msg string) {
	w.Header().Set("Retry-After", "1")
	r.answer(w, provider, http.StatusTooManyRequests, "rate_limited", msg)
}

// wake enqueues every Sync the push matches — of namespace only, unless
// it is "" — and returns them as namespace/name; notice is when the push
// notice arrived. On error some may have been enqueued; waking twice is
// harmless.
func (r *Receiver) wake(ctx context.Context, p Push, namespace string, notice time.Time) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Limits.WakeTimeout)
	defer cancel()
	return wakeMatching(ctx, r.opts.Syncs, r.opts.Wake, p, namespace, notice)
}

// wakeMatching hands each Sync of syncs that p matches (of namespace only,
// unless "") to wake, until ctx is done, and returns them as
// namespace/name.
func wakeMatching(ctx context.Context, syncs client.Reader, wake chan<- controller.WakeUp, p Push, namespace string, notice time.Time) ([]string, error) {
	var list v1alpha1.SyncList
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := syncs.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("list Syncs: %w", err)
	}
	woken := []string{}
	for _, s := range Match(list.Items, p) {
		select {
		case wake <- controller.WakeUp{Sync: s, Notice: notice}:
			woken = append(woken, s.Namespace+"/"+s.Name)
		case <-ctx.Done():
			return woken, fmt.Errorf("hand Sync %s/%s to the Sync controller: %w", s.Namespace, s.Name, ctx.Err())
		}
	}
	return woken, nil
}

func (r *Receiver) elected() bool {
	if r.opts.Elected == nil {
		return true
	}
	select {
	case <-r.opts.Elected:
		return true
	default:
		return false
	}
}

// warn emits a Warning event on the webhook Secret on, at most one per
// endpoint (provider, and namespace for a tenant's) every EventInterval;
// the next one counts those held back.
func (r *Receiver) warn(on types.NamespacedName, provider string, now time.Time, format string, args ...any) {
	if r.opts.Recorder == nil {
		return
	}
	r.mu.Lock()
	if last, ok := r.lastWarn[provider]; ok && now.Sub(last) < r.opts.Limits.EventInterval {
		r.refused[provider]++
		r.mu.Unlock()
		return
	}
	held := r.refused[provider]
	r.lastWarn[provider], r.refused[provider] = now, 0
	r.mu.Unlock()
	note := fmt.Sprintf(format, args...)
	if held > 0 {
		note += fmt.Sprintf(" (and %d more refused since the last event)", held)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: on.Namespace, Name: on.Name}}
	r.opts.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, ReasonWebhookRejected, "Receive", "%s", note)
}

// answer replies without Syncs woken; result labels the request in the
// driftless_webhook_requests_total metric.
func (r *Receiver) answer(w http.ResponseWriter, provider string, code int, result, msg string) {
	r.reply(w, provider, code, Reply{Message: msg, Woken: []string{}}, result)
}

func (r *Receiver) reply(w http.ResponseWriter, provider string, code int, body Reply, result string) {
	requests.WithLabelValues(provider, result).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// readBody reads at most limit bytes; a larger body is an
// *http.MaxBytesError, whether announced by Content-Length or not.
func readBody(w http.ResponseWriter, req *http.Request, limit int64) ([]byte, error) {
	if req.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return io.ReadAll(http.MaxBytesReader(w, req.Body, limit))
}

// sender is the address a request is limited and logged by: the TCP
// peer, or the client a trusted proxy forwarded (forwarded.Sender).
func (r *Receiver) sender(req *http.Request) string {
	return forwarded.Sender(req, r.opts.TrustedProxies)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
