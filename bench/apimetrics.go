package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// serverRequests reads apiserver_request_total from the API server's
// /metrics with the admin client and sums it by verb and resource (dry
// runs apart). Unlike requestCounter it sees every client: the harness,
// kubectl, the API server's own loopback client.
func serverRequests(ctx context.Context, cs kubernetes.Interface) (requestCounts, error) {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	out := requestCounts{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
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
		labels := parseLabels(labelText)
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
		out[requestKey{Verb: verb, Resource: resource}] += int(value)
	}
	return out, sc.Err()
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
