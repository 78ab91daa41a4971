package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/admission"
	"github.com/driftless/driftless/internal/cli"
)

// admissionCost is what the agent's admission webhook (--admission-warnings)
// adds to a write of a managed object: a merge patch of a labelled
// ConfigMap, timed with the webhook registered and unregistered in
// alternating rounds of the same run, on the same control plane.
type admissionCost struct {
	Rounds  int          `json:"rounds"`
	With    distribution `json:"with_webhook"`
	Without distribution `json:"without_webhook"`
	// RatioP50 and RatioP99 are With over Without.
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
}

// countWarnings counts the API server's warnings a client receives: the
// webhook warns about every write of a managed object, so a warning says
// the API server called it.
type countWarnings struct{ n atomic.Int64 }

func (w *countWarnings) HandleWarningHeader(int, string, string) { w.n.Add(1) }

// runAdmission measures writes writes with and as many without the
// webhook, on a control plane of its own, with the agent run as
// `driftless agent --admission-warnings` runs it.
func runAdmission(ctx context.Context, o options, writes int) (_ *admissionCost, err error) {
	b, stop, err := startBench(ctx, o, "admission")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	ns := syncNamespace
	// A Sync that syncs and reverts nothing, so only the bench writes the
	// object, which carries its label.
	selfHeal := false
	if err := b.admin.Create(ctx, &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:   v1alpha1.Source{Git: v1alpha1.GitSource{URL: "file:///nonexistent", Branch: "main"}},
			Interval: metav1.Duration{Duration: time.Hour}, SelfHeal: &selfHeal, Suspend: true,
		},
	}); err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "measured", Labels: map[string]string{v1alpha1.SyncLabel: v1alpha1.SyncLabelValue(ns, "apps")}},
		Data:       map[string]string{"greeting": "0"},
	}
	if err := b.admin.Create(ctx, cm); err != nil {
		return nil, err
	}

	step("starting the agent with --admission-warnings")
	addr, err := loopbackAddr()
	if err != nil {
		return nil, err
	}
	agentCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	cmd := cli.NewRootCommand(io.Discard, io.Discard)
	cmd.SetArgs([]string{"agent", "--kubeconfig", b.env.ControlPlane.KubeconfigPath(), "--namespace", ns,
		"--admission-warnings", "--admission-bind-address", addr, "--admission-webhook-url", "https://" + addr + admission.Path,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false", "--cache-dir", filepath.Join(b.dir, "agent-cache")})
	go func() { done <- cmd.ExecuteContext(agentCtx) }()
	defer func() {
		cancel()
		err = errors.Join(err, <-done)
	}()

	warnings := &countWarnings{}
	cfg := rest.CopyConfig(b.env.Config)
	cfg.WarningHandler = warnings
	cfg.QPS, cfg.Burst = 1000, 1000
	wc, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	n := 0
	write := func() (time.Duration, bool, error) {
		n++
		before := warnings.n.Load()
		start := time.Now()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"greeting":"%d"}}`, n))
		err := wc.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "measured"}}, patch)
		return time.Since(start), warnings.n.Load() > before, err
	}
	// until writes until the API server does (or does not) call the webhook.
	until := func(called bool) error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if _, warned, err := write(); err != nil {
				return err
			} else if warned == called {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the API server did not start or stop calling the webhook (called = %v) within 2 minutes", !called)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := until(true); err != nil {
		return nil, err
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := b.admin.Get(ctx, client.ObjectKey{Name: admission.ConfigurationName(ns)}, &vwc); err != nil {
		return nil, err
	}
	const rounds = 4
	perRound := max(writes/rounds, 1)
	step("%d writes with and %d without the webhook, in %d alternating rounds", rounds*perRound, rounds*perRound, rounds)
	var with, without []time.Duration
	for range rounds {
		if with, err = timed(with, perRound, write, until(true)); err != nil {
			return nil, err
		}
		if err := b.admin.Delete(ctx, &vwc); err != nil {
			return nil, err
		}
		if without, err = timed(without, perRound, write, until(false)); err != nil {
			return nil, err
		}
		vwc.ResourceVersion, vwc.UID = "", ""
		if err := b.admin.Create(ctx, &vwc); err != nil {
			return nil, err
		}
	}
	r := &admissionCost{Rounds: rounds, With: distributionOf(with), Without: distributionOf(without)}
	r.RatioP50, r.RatioP99 = r.With.P50/r.Without.P50, r.With.P99/r.Without.P99
	return r, nil
}

// timed appends the durations of n writes to ds, unless ready failed.
func timed(ds []time.Duration, n int, write func() (time.Duration, bool, error), ready error) ([]time.Duration, error) {
	if ready != nil {
		return ds, ready
	}
	for range n {
		d, _, err := write()
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}
