package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// drift is the revert latency after kubectl-edit style updates.
type drift struct {
	Latency distribution `json:"revert_latency"`
	// RequestsPerRevert is driftless's own requests per edit.
	RequestsPerRevert float64        `json:"driftless_requests_per_revert"`
	Requests          requestSummary `json:"driftless_requests"`
	// SyncBytesPerRevert is what driftless sent and received about the
	// Sync itself (syncs, syncs/status) per edit: recording an incident
	// must not cost a copy of an inventory-sized status.
	SyncBytesPerRevert float64 `json:"driftless_sync_bytes_per_revert"`
	CPU                float64 `json:"cpu_s"`
	// WallProfile covers the edits, with -profile.
	WallProfile *wallProfile `json:"wall_profile,omitempty"`
}

// drift edits the memory limit of managed Deployments, one at a time, as
// `kubectl edit` does (an update with field manager kubectl-edit), and
// times each from sending the update to the watch event that shows the
// limit back at its value in git. Each edit hits another Deployment (while
// there are enough), so the fight back-off never applies.
func (b *bench) drift(ctx context.Context, l *live, r *drift) error {
	if b.o.edits <= 0 {
		return nil // -edits 0: not measured (the report says so)
	}
	if err := quiet(ctx, l.agent, time.Second, time.Minute); err != nil {
		return err
	}
	var sampler *wallSampler
	stopCPU := func() {}
	if b.o.profileDir != "" {
		sampler = startWallSampler(25 * time.Millisecond)
		var err error
		if stopCPU, err = b.prof.cpu(fmt.Sprintf("cpu-drift-%d", b.size)); err != nil {
			return err
		}
	}
	reqBefore, _ := l.agent.requests.snapshot()
	syncBytesBefore := l.agent.requests.bytesOf("syncs", "syncs/status")
	cpuBefore := readCPU()
	var latencies []time.Duration
	for i := 0; i < b.o.edits; i++ {
		app := (i * 37) % l.work.apps
		d, err := b.editOnce(ctx, l.work.namespaceOf(app), appName(app))
		if err != nil {
			return fmt.Errorf("edit %d: %w", i+1, err)
		}
		latencies = append(latencies, d)
		time.Sleep(50 * time.Millisecond)
	}
	if err := quiet(ctx, l.agent, time.Second, time.Minute); err != nil {
		return err
	}
	r.CPU = readCPU().minus(cpuBefore).self.Seconds()
	stopCPU()
	if sampler != nil {
		p := sampler.finish()
		r.WallProfile = &p
		b.printWallProfile("drift reverts", &p)
	}
	reqAfter, _ := l.agent.requests.snapshot()
	reqs := reqAfter.minus(reqBefore)
	r.Requests = summarize(reqs)
	r.RequestsPerRevert = float64(reqs.total()) / float64(b.o.edits)
	r.SyncBytesPerRevert = float64(l.agent.requests.bytesOf("syncs", "syncs/status")-syncBytesBefore) / float64(b.o.edits)
	r.Latency = distributionOf(latencies)
	step("drift revert over %d edits: p50 %.0f ms, p90 %.0f ms, p99 %.0f ms; %.1f requests and %.1f KiB about the Sync per revert (%s)",
		r.Latency.N, r.Latency.P50, r.Latency.P90, r.Latency.P99, r.RequestsPerRevert, r.SyncBytesPerRevert/1024, reqs.detailed())
	return nil
}

func (b *bench) editOnce(ctx context.Context, ns, name string) (time.Duration, error) {
	deployments := b.env.Clientset.AppsV1().Deployments(ns)
	// Watch from the list's resourceVersion: an object's own one may be
	// older than the API server's watch window.
	one := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := deployments.List(ctx, one)
	if err != nil {
		return 0, err
	}
	if len(list.Items) != 1 {
		return 0, fmt.Errorf("deployment %s/%s not found", ns, name)
	}
	d := &list.Items[0]
	want := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()
	one.ResourceVersion = list.ResourceVersion
	w, err := deployments.Watch(ctx, one)
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
	// The clock starts before the update is sent: the update's own round
	// trip is counted, since the agent may see the edit before this
	// process reads the response.
	start := time.Now()
	edited, err := deployments.Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		return 0, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	at, err := untilEvent(waitCtx, w, func(obj any) bool {
		got, ok := obj.(*appsv1.Deployment)
		return ok && got.ResourceVersion != edited.ResourceVersion && got.Generation > edited.Generation &&
			got.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String() == want
	})
	if err != nil {
		return 0, fmt.Errorf("deployment %s/%s not reverted: %w", ns, name, err)
	}
	return at.Sub(start), nil
}
