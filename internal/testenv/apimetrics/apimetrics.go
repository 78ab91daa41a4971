// Package apimetrics reads how many requests an API server has served,
// by verb and resource, from its /metrics (apiserver_request_total), and
// how many watches it holds open (apiserver_longrunning_requests). The
// bench and the request-count budgets of tests read it before and after
// what they measure. It sees every client of the server, not only one
// process's, so a measure is exact only while nothing else asks for the
// resources it counts.
package apimetrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// Key is a verb as the API server names it (GET, LIST, WATCH, POST, PUT,
// PATCH, APPLY, DELETE, DELETECOLLECTION), with " dry-run" appended for
// dry runs, and a resource[/subresource] ("non-resource" for paths such
// as /healthz).
type Key struct {
	Verb     string
	Resource string
}

// Counts counts requests by Key.
type Counts map[Key]int

// Minus returns c − before, leaving out the keys that did not change.
func (c Counts) Minus(before Counts) Counts {
	out := Counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Read reads apiserver_request_total from the API server's /metrics
// with cs, which may read it (the admin's client), and sums it by verb and
// resource.
func Read(ctx context.Context, cs kubernetes.Interface) (Counts, error) {
	out := Counts{}
	err := samples(ctx, cs, "apiserver_request_total", func(labels map[string]string, value float64) {
		resource := labels["resource"]
		if resource == "" {
			resource = "non-resource"
		}
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		verb := labels["verb"]
		if labels["dry_run"] != "" {
			verb += " dry-run"
		}
		out[Key{Verb: verb, Resource: resource}] += int(value)
	})
	return out, err
}

// OpenWatches reads how many watches the API server holds open now
// (apiserver_longrunning_requests of verb WATCH), by resource and scope:
// "configmaps cluster" counts the watches of ConfigMaps in every
// namespace, "configmaps namespace" those of one namespace.
func OpenWatches(ctx context.Context, cs kubernetes.Interface) (map[string]int, error) {
	out := map[string]int{}
	found := false
	err := samples(ctx, cs, "apiserver_longrunning_requests", func(labels map[string]string, value float64) {
		found = true
		if labels["verb"] == "WATCH" {
			out[labels["resource"]+" "+labels["scope"]] += int(value)
		}
	})
	if err == nil && !found {
		err = errors.New("the API server's /metrics has no apiserver_longrunning_requests")
	}
	return out, err
}

// Watching reads how many watches of each resource the API server holds
// open now (apiserver_longrunning_requests, verb WATCH), from every
// client, the API server's own included, whatever their scope.
func Watching(ctx context.Context, cs kubernetes.Interface) (map[string]int, error) {
	open, err := OpenWatches(ctx, cs)
	out := map[string]int{}
	for key, n := range open {
		resource, _, _ := strings.Cut(key, " ")
		out[resource] += n
	}
	return out, err
}

// samples calls add with the labels and value of each sample of metric
// in the API server's /metrics, read with cs.
func samples(ctx context.Context, cs kubernetes.Interface, metric string, add func(labels map[string]string, value float64)) error {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("read the API server's /metrics: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), metric+"{")
		if !ok {
			continue
		}
		labelText, valueText, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(valueText), 64)
		if err != nil {
			continue
		}
		add(parseLabels(labelText), value)
	}
	return sc.Err()
}

// parseLabels parses `a="x",b="y"`; label values here never hold quotes.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		name, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		value, rest, _ := strings.Cut(rest, `"`)
		out[name] = value
		s = strings.TrimPrefix(rest, ",")
	}
	return out
}
