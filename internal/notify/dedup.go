package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// deduper decides which notices become messages. It is a state machine
// per Sync, with no goroutines and no I/O: time comes from the caller.
//
//   - A failure (or health timeout) that repeats with the same reason and
//     message is sent once, then again as a reminder at most every
//     Reminder, saying how many repeats were not sent.
//   - The first Ready after a failure is sent as recovered.
//   - More than FlapLimit changes between failing and Ready within
//     FlapWindow: one flapping message, then silence on failed and
//     recovered until the Sync has kept one state for FlapWindow, when
//     one message says how it settled.
//   - Drift reverts of one Sync are gathered for DriftWindow and sent as
//     one message with a count and the objects.
//   - Any other message (changes applied, drift reported, reverts paused)
//     that repeats word for word is sent again only after Reminder.
//
// Memory stays bounded: flush forgets messages sent longer than Reminder
// ago, and the whole state of a Sync that is not failing and has had no
// notice for longer than Reminder and FlapWindow (which is then the same
// as a Sync never seen); a deleted Sync's state goes at once.
type deduper struct {
	cfg   Config
	syncs map[types.NamespacedName]*syncState
}

type syncState struct {
	labels     map[string]string
	lastNotice time.Time
	failing    bool
	failKey    string
	failReason string
	failSince  time.Time
	lastSent   time.Time // of the failing state's message
	suppressed int       // repeats of the failing state not sent

	flips        []time.Time
	flapNotified bool

	sent  map[string]time.Time // other messages, by key
	burst *burst
}

type burst struct {
	start   time.Time
	count   int
	objects map[string]int
	last    notice
}

func newDeduper(cfg Config) *deduper {
	return &deduper{cfg: cfg, syncs: map[types.NamespacedName]*syncState{}}
}

func (d *deduper) state(n notice, now time.Time) *syncState {
	st := d.syncs[n.sync]
	if st == nil {
		st = &syncState{sent: map[string]time.Time{}}
		d.syncs[n.sync] = st
	}
	st.labels, st.lastNotice = n.labels, now
	return st
}

// fingerprint keys a message's text without keeping it.
func fingerprint(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}

// observe takes one notice at now and returns the messages to send now.
func (d *deduper) observe(n notice, now time.Time) []Message {
	if n.gone {
		return d.forget(n.sync, now)
	}
	st := d.state(n, now)
	msg := func(e Event, summary string, count int) []Message {
		return []Message{{Sync: n.sync, Labels: n.labels, Event: e, Reason: n.reason, Summary: summary,
			Detail: n.message, Revision: n.revision, Subject: n.commit.Subject, Author: n.commit.Author, CommitURL: n.commit.URL, Artifact: n.commit.Artifact,
			Time: now, Count: count}}
	}
	switch n.event {
	case Failed, HealthTimeout:
		key := fingerprint(string(n.event), n.reason, n.message)
		if st.failing && key == st.failKey {
			if now.Sub(st.lastSent) < d.cfg.Reminder.Duration || d.flapping(st, now) {
				st.suppressed++
				return nil
			}
			count := st.suppressed + 1
			st.suppressed, st.lastSent = 0, now
			return msg(n.event, fmt.Sprintf("Sync %s still failing (%s) since %s%s; %d repeat(s) since the last message",
				n.sync, n.reason, st.failSince.UTC().Format(time.RFC3339), atRevision(n.revision), count), count)
		}
		if !st.failing {
			st.failing, st.failSince = true, now
			st.flips = append(st.flips, now)
		}
		st.failKey, st.failReason, st.lastSent, st.suppressed = key, n.reason, now, 0
		if m, ok := d.flapStart(st, n, now); ok {
			return m
		}
		if d.flapping(st, now) {
			return nil
		}
		what := "failed"
		if n.event == HealthTimeout {
			what = "applied, but objects did not become healthy"
		}
		return msg(n.event, fmt.Sprintf("Sync %s %s (%s)%s", n.sync, what, n.reason, atRevision(n.revision)), 1)

	case Succeeded:
		if st.failing {
			since, reason := st.failSince, st.failReason
			st.failing, st.failKey, st.suppressed = false, "", 0
			st.flips = append(st.flips, now)
			if m, ok := d.flapStart(st, n, now); ok {
				return m
			}
			if d.flapping(st, now) {
				return nil
			}
			return msg(Recovered, fmt.Sprintf("Sync %s recovered%s after failing (%s) for %s",
				n.sync, atRevision(n.revision), reason, now.Sub(since).Round(time.Second)), 1)
		}
		if !n.changes {
			return nil
		}
		return d.once(st, n, now, msg(Succeeded, fmt.Sprintf("Sync %s applied changes%s", n.sync, atRevision(n.revision)), 1))

	case DriftReverted:
		if st.burst == nil {
			st.burst = &burst{start: now, objects: map[string]int{}}
		}
		st.burst.count++
		st.burst.objects[objectOf(n.message)]++
		st.burst.last = n
		return nil

	case DriftReported:
		return d.once(st, n, now, msg(DriftReported, fmt.Sprintf("Sync %s: drift found and left in place", n.sync), 1))
	case Paused:
		return d.once(st, n, now, msg(Paused, fmt.Sprintf("Sync %s: another writer keeps changing an object; reverts paused", n.sync), 1))
	case ImageUpdated:
		return d.once(st, n, now, msg(ImageUpdated, fmt.Sprintf("Sync %s: image automation updated git", n.sync), 1))
	case ImageUpdateFailed:
		return d.once(st, n, now, msg(ImageUpdateFailed, fmt.Sprintf("Sync %s: image automation failed (%s)", n.sync, n.reason), 1))
	}
	return nil
}

// once sends m unless the same notice was sent within Reminder.
func (d *deduper) once(st *syncState, n notice, now time.Time, m []Message) []Message {
	key := fingerprint(string(n.event), n.reason, n.message)
	if at, ok := st.sent[key]; ok && now.Sub(at) < d.cfg.Reminder.Duration {
		return nil
	}
	st.sent[key] = now
	return m
}

// forget drops the state of a deleted Sync, sending the drift reverts it
// gathered.
func (d *deduper) forget(k types.NamespacedName, now time.Time) []Message {
	st := d.syncs[k]
	delete(d.syncs, k)
	if st == nil || st.burst == nil {
		return nil
	}
	return []Message{burstMessage(st.burst, now, d.cfg.DriftWindow.Duration)}
}

// prune forgets what no longer changes a decision: messages sent longer
// than Reminder ago, and a Sync quiet for longer than Reminder and
// FlapWindow that is not failing and has nothing pending.
func (d *deduper) prune(k types.NamespacedName, st *syncState, now time.Time) {
	for key, at := range st.sent {
		if now.Sub(at) >= d.cfg.Reminder.Duration {
			delete(st.sent, key)
		}
	}
	quiet := max(d.cfg.Reminder.Duration, d.cfg.FlapWindow.Duration)
	if !st.failing && st.burst == nil && !st.flapNotified && now.Sub(st.lastNotice) > quiet {
		delete(d.syncs, k)
	}
}

// recentFlips drops flips older than the window and counts the rest.
func (d *deduper) recentFlips(st *syncState, now time.Time) int {
	i := 0
	for i < len(st.flips) && now.Sub(st.flips[i]) > d.cfg.FlapWindow.Duration {
		i++
	}
	st.flips = st.flips[i:]
	return len(st.flips)
}

func (d *deduper) flapping(st *syncState, now time.Time) bool {
	return st.flapNotified || d.recentFlips(st, now) > d.cfg.FlapLimit
}

// flapStart returns the flapping summary when st just crossed the limit.
func (d *deduper) flapStart(st *syncState, n notice, now time.Time) ([]Message, bool) {
	if st.flapNotified || d.recentFlips(st, now) <= d.cfg.FlapLimit {
		return nil, false
	}
	st.flapNotified = true
	state := "Ready"
	if st.failing {
		state = "failing (" + n.reason + ")"
	}
	return []Message{{Sync: n.sync, Labels: n.labels, Event: Flapping, Reason: n.reason, Time: now, Revision: n.revision,
		Subject: n.commit.Subject, Author: n.commit.Author, CommitURL: n.commit.URL, Artifact: n.commit.Artifact,
		Detail: n.message, Count: len(st.flips),
		Summary: fmt.Sprintf("Sync %s is flapping: %d changes between failing and Ready within %s, now %s; "+
			"no further failed or recovered messages until it keeps one state for %s",
			n.sync, len(st.flips), d.cfg.FlapWindow.Duration, state, d.cfg.FlapWindow.Duration)}}, true
}

// flush returns what is due at now: drift bursts whose window closed,
// and Syncs that stopped flapping. It also prunes the state.
func (d *deduper) flush(now time.Time) []Message {
	var out []Message
	keys := make([]types.NamespacedName, 0, len(d.syncs))
	for k := range d.syncs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		st := d.syncs[k]
		if b := st.burst; b != nil && now.Sub(b.start) >= d.cfg.DriftWindow.Duration {
			st.burst = nil
			out = append(out, burstMessage(b, now, d.cfg.DriftWindow.Duration))
		}
		if st.flapNotified && d.recentFlips(st, now) == 0 {
			st.flapNotified = false
			state, e := "Ready", Recovered
			if st.failing {
				state, e = "failing ("+st.failReason+")", Failed
				st.lastSent = now
			}
			out = append(out, Message{Sync: k, Labels: st.labels, Event: e, Reason: st.failReason, Time: now, Count: 1,
				Summary: fmt.Sprintf("Sync %s stopped flapping: %s for %s", k, state, d.cfg.FlapWindow.Duration)})
		}
		d.prune(k, st, now)
	}
	return out
}

func burstMessage(b *burst, now time.Time, window time.Duration) Message {
	objs := make([]string, 0, len(b.objects))
	for o := range b.objects {
		objs = append(objs, o)
	}
	sort.Strings(objs)
	for i, o := range objs {
		objs[i] = fmt.Sprintf("%s (%d)", o, b.objects[o])
	}
	summary := fmt.Sprintf("Sync %s reverted a drift", b.last.sync)
	if b.count > 1 {
		summary = fmt.Sprintf("Sync %s reverted %d drifts within %s: %s", b.last.sync, b.count, window, strings.Join(objs, ", "))
	}
	return Message{Sync: b.last.sync, Labels: b.last.labels, Event: DriftReverted, Reason: b.last.reason, Summary: summary,
		Detail: b.last.message, Revision: b.last.revision, Subject: b.last.commit.Subject, Author: b.last.commit.Author,
		CommitURL: b.last.commit.URL, Artifact: b.last.commit.Artifact, Time: now, Count: b.count}
}

// objectOf is the "Kind/namespace/name" a drift note starts with.
func objectOf(note string) string {
	if i := strings.Index(note, ": "); i > 0 {
		return note[:i]
	}
	return "an object"
}
