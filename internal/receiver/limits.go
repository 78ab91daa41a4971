package receiver

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what the receiver accepts. DefaultLimits are the agent's.
type Limits struct {
	// MaxBodyBytes is the largest body read; a larger one gets 413.
	MaxBodyBytes int64
	// PerAddress and PerAddressBurst limit the authenticated deliveries
	// from one remote address: the TCP peer, not X-Forwarded-For, which
	// anyone can set, unless the peer is one of Options.TrustedProxies.
	// Past it a request from the address gets 429 before its body is
	// read. Requests that fail the signature check are charged to
	// RefusedPerAddress and RefusedPerAddressBurst instead, a stricter
	// budget of their own, so that a flood of bad requests cannot spend
	// the budget of the real deliveries from the same address; past it
	// they get 429 instead of 401, without a log line.
	PerAddress             rate.Limit
	PerAddressBurst        int
	RefusedPerAddress      rate.Limit
	RefusedPerAddressBurst int
	// Global and GlobalBurst limit all requests together, authenticated
	// or not: past it a request gets 429 before its body is read.
	Global      rate.Limit
	GlobalBurst int
	// ReplayWindow is how long a delivery ID is remembered: the same
	// provider delivery received again within it is answered 200 and
	// ignored.
	ReplayWindow time.Duration
	// SecretTTL is how long the webhook Secret is cached; a changed
	// Secret is used after at most this long.
	SecretTTL time.Duration
	// EventInterval is the least time between two Warning events about
	// refused requests to one endpoint; those refused meanwhile are
	// counted in the next event (and each is logged and counted in the
	// driftless_webhook_requests_total metric).
	EventInterval time.Duration
	// WakeTimeout bounds how long a request waits to hand its Syncs to
	// the Sync controller's queue; past it the request gets 503.
	WakeTimeout time.Duration
}

// DefaultLimits returns the agent's limits: 1 MiB bodies, 5 deliveries a
// second (bursts of 30) and 1 refused request a second (bursts of 10)
// per address, 50 requests a second (bursts of 100) in all,
// deliveries remembered for 10 minutes, the Secret cached for 10 seconds,
// at most one Warning event a minute per endpoint.
func DefaultLimits() Limits {
	return Limits{
		MaxBodyBytes:           1 << 20,
		PerAddress:             5,
		PerAddressBurst:        30,
		RefusedPerAddress:      1,
		RefusedPerAddressBurst: 10,
		Global:                 50,
		GlobalBurst:            100,
		ReplayWindow:           10 * time.Minute,
		SecretTTL:              10 * time.Second,
		EventInterval:          time.Minute,
		WakeTimeout:            10 * time.Second,
	}
}

// maxTracked bounds the remote addresses and delivery IDs held in memory.
const maxTracked = 10000

// limiter is two token buckets per remote address — authenticated
// deliveries, refused requests — plus one for everything.
type limiter struct {
	mu      sync.Mutex
	global  *rate.Limiter
	limits  Limits
	perAddr map[string]*addrBucket
}

type addrBucket struct {
	delivered *rate.Limiter
	refused   *rate.Limiter
	seen      time.Time
}

func newLimiter(l Limits) *limiter {
	return &limiter{global: rate.NewLimiter(l.Global, l.GlobalBurst), limits: l, perAddr: map[string]*addrBucket{}}
}

func (l *limiter) bucket(addr string, now time.Time) *addrBucket {
	b := l.perAddr[addr]
	if b == nil {
		if len(l.perAddr) >= maxTracked {
			l.sweep(now)
		}
		b = &addrBucket{delivered: rate.NewLimiter(l.limits.PerAddress, l.limits.PerAddressBurst),
			refused: rate.NewLimiter(l.limits.RefusedPerAddress, l.limits.RefusedPerAddressBurst)}
		l.perAddr[addr] = b
	}
	b.seen = now
	return b
}

// allow is the check before the body is read: addr's delivery budget has
// a token left (not taken: only a delivery that proves authentic takes
// it), and then the global bucket gives one. A request refused by its
// address's budget costs the global one nothing.
func (l *limiter) allow(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket(addr, now).delivered.TokensAt(now) >= 1 && l.global.AllowN(now, 1)
}

// delivered charges an authenticated request to addr's delivery budget.
// It reports false past the budget (requests checked at once may have
// passed allow together).
func (l *limiter) delivered(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket(addr, now).delivered.AllowN(now, 1)
}

// refused charges a request that failed the signature check to addr's
// refused budget. It reports false past that budget.
func (l *limiter) refused(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket(addr, now).refused.AllowN(now, 1)
}

// sweep drops buckets idle long enough to be full again, which is the
// same as forgetting them; if that is not enough it forgets every
// address (the global bucket still holds).
func (l *limiter) sweep(now time.Time) {
	refill := time.Minute
	for _, r := range []struct {
		rate  rate.Limit
		burst int
	}{{l.limits.PerAddress, l.limits.PerAddressBurst}, {l.limits.RefusedPerAddress, l.limits.RefusedPerAddressBurst}} {
		if r.rate > 0 {
			refill = max(refill, time.Duration(float64(r.burst)/float64(r.rate)*float64(time.Second))+time.Second)
		}
	}
	for addr, b := range l.perAddr {
		if now.Sub(b.seen) > refill {
			delete(l.perAddr, addr)
		}
	}
	if len(l.perAddr) >= maxTracked {
		clear(l.perAddr)
	}
}

// deliveries remembers delivery IDs for a window.
type deliveries struct {
	mu     sync.Mutex
	window time.Duration
	seen   map[string]time.Time
}

func newDeliveries(window time.Duration) *deliveries {
	return &deliveries{window: window, seen: map[string]time.Time{}}
}

// first records id at now. It reports false, with the time id was first
// received, when id was already received within the window.
func (d *deliveries) first(id string, now time.Time) (bool, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if at, ok := d.seen[id]; ok && now.Sub(at) < d.window {
		return false, at
	}
	if len(d.seen) >= maxTracked {
		d.sweep(now)
	}
	d.seen[id] = now
	return true, now
}

// forget drops id, so that a delivery that failed can be delivered again.
func (d *deliveries) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.seen, id)
}

// sweep drops expired IDs and, if still full, the oldest one.
func (d *deliveries) sweep(now time.Time) {
	var oldestID string
	var oldest time.Time
	for id, at := range d.seen {
		if now.Sub(at) >= d.window {
			delete(d.seen, id)
			continue
		}
		if oldestID == "" || at.Before(oldest) {
			oldestID, oldest = id, at
		}
	}
	if len(d.seen) >= maxTracked {
		delete(d.seen, oldestID)
	}
}
