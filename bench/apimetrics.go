package main

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"github.com/driftless/driftless/internal/testenv/apimetrics"
)

// serverRequests reads apiserver_request_total from the API server's
// /metrics with the admin client (apimetrics.Read), summed by verb and
// resource (dry runs apart). Unlike requestCounter it sees every client:
// the harness, kubectl, the API server's own loopback client.
func serverRequests(ctx context.Context, cs kubernetes.Interface) (requestCounts, error) {
	counts, err := apimetrics.Read(ctx, cs)
	if err != nil {
		return nil, err
	}
	out := make(requestCounts, len(counts))
	for k, v := range counts {
		out[requestKey(k)] = v
	}
	return out, nil
}
