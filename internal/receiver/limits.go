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
	// Global and GlobalBurst limit the authenticated deliveries from all
	// addresses together. Both are checked before the body is read (a
	// request past either gets 429 at once) but only spent by a request
	// whose signature passes, so that requests that fail it cannot spend
	// them.
	PerAddress      rate.Limit
	PerAddressBurst int
	Global          rate.Limit
	GlobalBurst     int
	// RefusedPerAddress and RefusedPerAddressBurst limit the requests
	// from one address that fail the signature check;
	// GlobalRefused and GlobalRefusedBurst those from all addresses
	// together. Past either, such a request gets 429 instead of 401,
	// without a log line or an event.
	RefusedPerAddress      rate.Limit
	RefusedPerAddressBurst int
	GlobalRefused          rate.Limit
	GlobalRefusedBurst     int
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
// per address, 50 deliveries a second (bursts of 100) and 10 refused
// requests a second (bursts of 50) in all,
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
		GlobalRefused:          10,
		GlobalRefusedBurst:     50,
		ReplayWindow:           10 * time.Minute,
		SecretTTL:              10 * time.Second,
		EventInterval:          time.Minute,
		WakeTimeout:            10 * time.Second,
	}
}

// maxTracked bounds the remote addresses and delivery IDs held in memory.
const maxTracked = 10000

// limiter is two token buckets per remote address — authenticated
// deliveries, refused requests — and the same two for all addresses.
type limiter struct {
	mu      sync.Mutex
	global  addrBucket
	limits  Limits
	perAddr map[string]*addrBucket
}

type addrBucket struct {
	delivered *rate.Limiter
	refused   *rate.Limiter
	seen      time.Time
}

func newLimiter(l Limits) *limiter {
	return &limiter{global: addrBucket{delivered: rate.NewLimiter(l.Global, l.GlobalBurst), refused: rate.NewLimiter(l.GlobalRefused, l.GlobalRefusedBurst)},
		limits: l, perAddr: map[string]*addrBucket{}}
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

// allow is the check before the body is read: addr's delivery budget and
// the global one have a token left. Neither is taken: only a delivery
// that proves authentic takes them, so requests that fail the signature
// check, from one address or many, cannot spend them.
func (l *limiter) allow(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket(addr, now).delivered.TokensAt(now) >= 1 && l.global.delivered.TokensAt(now) >= 1
}

// delivered charges an authenticated request to addr's delivery budget
// and the global one. It reports false past either (requests checked at
// once may have passed allow together).
func (l *limiter) delivered(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return take(now, l.bucket(addr, now).delivered, l.global.delivered)
}

// refused charges a request that failed the signature check to addr's
// refused budget and the global one. It reports false past either.
func (l *limiter) refused(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return take(now, l.bucket(addr, now).refused, l.global.refused)
}

// take takes a token from each bucket, or from none if one is empty.
func take(now time.Time, buckets ...*rate.Limiter) bool {
	for _, b := range buckets {
		if b.TokensAt(now) < 1 {
			return false
		}
	}
	for _, b := range buckets {
		b.AllowN(now, 1)
	}
	return true
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
