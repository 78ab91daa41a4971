package cli

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/admission"
)

// countWarnings counts the API server's warnings a client receives.
type countWarnings struct{ n atomic.Int64 }

func (w *countWarnings) HandleWarningHeader(_ int, _ string, _ string) { w.n.Add(1) }

// The added latency of the admission webhook to a write of a managed
// object, against the same write with the webhook unregistered, in the
// same run, in alternating rounds. It logs the measurement and asserts
// nothing about timings:
//
//	DRIFTLESS_K8S_BIN=bin/k8s go test -run TestAdmissionWebhookLatency -v ./internal/cli/
func TestAdmissionWebhookLatency(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	startAdmissionAgent(t, ns)
	// A Sync that reverts nothing, so only the test writes the object.
	selfHeal := false
	if err := c.Create(ctx, &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:   v1alpha1.Source{Git: v1alpha1.GitSource{URL: "file:///nonexistent", Branch: "main"}},
			Interval: metav1.Duration{Duration: time.Hour}, SelfHeal: &selfHeal, Suspend: true,
		},
	}); err != nil {
		t.Fatal(err)
	}
	cm := mustConfigMap(ns, "measured")
	cm.Labels = map[string]string{v1alpha1.SyncLabel: v1alpha1.SyncLabelValue(ns, "apps")}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	warnings := &countWarnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	cfg.QPS, cfg.Burst = 1000, 1000
	wc, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	write := func() (time.Duration, bool) {
		n++
		before := warnings.n.Load()
		start := time.Now()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"greeting":"%d"}}`, n))
		if err := wc.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "measured"}}, patch); err != nil {
			t.Fatal(err)
		}
		return time.Since(start), warnings.n.Load() > before
	}
	// until writes until the API server does (or does not) call the webhook.
	until := func(called bool) {
		deadline := time.Now().Add(time.Minute)
		for {
			if _, warned := write(); warned == called {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the API server did not start or stop calling the webhook (called = %v) within a minute", !called)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: admission.ConfigurationName(ns)}, &vwc); err != nil {
		t.Fatal(err)
	}
	const rounds, perRound = 4, 100
	var with, without []time.Duration
	for range rounds {
		until(true)
		for range perRound {
			d, _ := write()
			with = append(with, d)
		}
		if err := c.Delete(ctx, &vwc); err != nil {
			t.Fatal(err)
		}
		until(false)
		for range perRound {
			d, _ := write()
			without = append(without, d)
		}
		vwc.ResourceVersion, vwc.UID = "", ""
		if err := c.Create(ctx, &vwc); err != nil {
			t.Fatal(err)
		}
	}
	p := func(l []time.Duration, q float64) time.Duration {
		s := slices.Clone(l)
		slices.Sort(s)
		return s[int(q*float64(len(s)-1))]
	}
	t.Logf("a merge patch of a managed ConfigMap, %d writes each, %d alternating rounds:", rounds*perRound, rounds)
	t.Logf("  webhook registered:   p50 %v  p99 %v", p(with, 0.5), p(with, 0.99))
	t.Logf("  webhook unregistered: p50 %v  p99 %v", p(without, 0.5), p(without, 0.99))
	t.Logf("  ratio:                p50 %.2f  p99 %.2f; added p50 %v  p99 %v",
		float64(p(with, 0.5))/float64(p(without, 0.5)), float64(p(with, 0.99))/float64(p(without, 0.99)),
		p(with, 0.5)-p(without, 0.5), p(with, 0.99)-p(without, 0.99))
}
