package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// requestCounter counts the API requests that pass through a transport,
// by verb and resource, and how long they were in flight. Wrapped into
// the agent's rest.Config, it sees exactly what driftless itself asks.
// Client-side rate limiting happens before the transport, so time spent
// waiting for the limiter is not in flight.
type requestCounter struct {
	mu     sync.Mutex
	counts requestCounts
	busy   time.Duration
	// latency sums time in flight by verb and status code.
	latency map[string]*latencyStat
	// bytes sums the bodies sent and received by resource (watches
	// left out): the work a request costs both ends, whatever the clock.
	bytes map[string]int64
}

type latencyStat struct {
	n     int
	total time.Duration
}

func newRequestCounter() *requestCounter {
	return &requestCounter{counts: requestCounts{}, latency: map[string]*latencyStat{}, bytes: map[string]int64{}}
}

// wrap is a rest.Config WrapTransport.
func (c *requestCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		key := classify(req)
		start := time.Now()
		resp, err := next.RoundTrip(req)
		took := time.Since(start)
		code := "error"
		if resp != nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		c.mu.Lock()
		c.counts[key]++
		if key.Verb != "WATCH" {
			c.bytes[key.Resource] += max(req.ContentLength, 0)
			if resp != nil && resp.Body != nil {
				resp.Body = &countingBody{ReadCloser: resp.Body, add: func(n int) {
					c.mu.Lock()
					c.bytes[key.Resource] += int64(n)
					c.mu.Unlock()
				}}
			}
			c.busy += took
			l := c.latency[key.Verb+" "+code]
			if l == nil {
				l = &latencyStat{}
				c.latency[key.Verb+" "+code] = l
			}
			l.n++
			l.total += took
		}
		c.mu.Unlock()
		return resp, err
	})
}

// countingBody reports the bytes read from a response body.
type countingBody struct {
	io.ReadCloser
	add func(int)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.add(n)
	return n, err
}

// bytesOf returns the bytes sent and received so far for the resources
// given.
func (c *requestCounter) bytesOf(resources ...string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, r := range resources {
		n += c.bytes[r]
	}
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// snapshot returns the counts so far and the total time requests (other
// than watches) were in flight.
func (c *requestCounter) snapshot() (requestCounts, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(requestCounts, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out, c.busy
}

// latencies returns the count and mean time in flight (ms) by verb and
// status code, since the counter started.
func (c *requestCounter) latencies() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, l := range c.latency {
		out[k] = fmt.Sprintf("%d requests, mean %.1f ms", l.n, float64(l.total.Microseconds())/1000/float64(l.n))
	}
	return out
}

// requestKey is a verb as the API server names it (GET, LIST, WATCH,
// POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION), with " dry-run"
// appended for dry runs, and a resource[/subresource].
type requestKey struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
}

// requestCounts counts requests by key.
type requestCounts map[requestKey]int

// minus returns c - before.
func (c requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (c requestCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// writes counts the requests that change stored state: not reads,
// watches or dry runs.
func (c requestCounts) writes() int {
	n := 0
	for k, v := range c {
		if isWrite(k.Verb) {
			n += v
		}
	}
	return n
}

func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// byVerb sums counts over resources.
func (c requestCounts) byVerb() map[string]int {
	out := map[string]int{}
	for k, v := range c {
		out[k.Verb] += v
	}
	return out
}

// String reads "GET 1010, PATCH dry-run 1010, APPLY 1010".
func (c requestCounts) String() string {
	if len(c) == 0 {
		return "none"
	}
	verbs := c.byVerb()
	names := make([]string, 0, len(verbs))
	for v := range verbs {
		names = append(names, v)
	}
	sort.Slice(names, func(i, j int) bool {
		if verbs[names[i]] != verbs[names[j]] {
			return verbs[names[i]] > verbs[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, v := range names {
		parts[i] = fmt.Sprintf("%s %d", v, verbs[v])
	}
	return strings.Join(parts, ", ")
}

// detailed reads "GET deployments 250, …", largest first.
func (c requestCounts) detailed() string {
	keys := make([]requestKey, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i].Verb+keys[i].Resource < keys[j].Verb+keys[j].Resource
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s %d", k.Verb, k.Resource, c[k])
	}
	return strings.Join(parts, ", ")
}

// classify names a request the way apiserver_request_total does.
func classify(req *http.Request) requestKey {
	q := req.URL.Query()
	resource, name := resourceOf(req.URL.Path)
	var verb string
	switch req.Method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			verb = "WATCH"
		case name == "" && resource != "discovery":
			verb = "LIST"
		default:
			verb = "GET"
		}
	case http.MethodPatch:
		verb = "PATCH"
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "APPLY"
		}
	case http.MethodDelete:
		verb = "DELETE"
		if name == "" {
			verb = "DELETECOLLECTION"
		}
	default:
		verb = req.Method
	}
	if q.Has("dryRun") {
		verb += " dry-run"
	}
	return requestKey{Verb: verb, Resource: resource}
}

// resourceOf parses /api/v1/…, /apis/<group>/<version>/… into a
// resource[/subresource] and an object name; anything else is
// "discovery".
func resourceOf(p string) (resource, name string) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "discovery", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaced: <resource>[/<name>[/<sub>]]
	}
	resource = parts[0]
	if len(parts) >= 2 {
		name = parts[1]
	}
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	return resource, name
}
