package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// resources maps the workload's kinds to their resources.
var resources = map[string]schema.GroupVersionResource{
	"Namespace":      {Version: "v1", Resource: "namespaces"},
	"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":      {Version: "v1", Resource: "configmaps"},
	"Service":        {Version: "v1", Resource: "services"},
	"Deployment":     {Group: "apps", Version: "v1", Resource: "deployments"},
}

// floorApply is the floor: a raw client-go server-side-apply loop, with no
// client-side rate limit, that applies the Namespaces and then every other
// object, concurrency requests at a time. It does nothing driftless must
// do (read, validate, compare, order by kind, record): it only writes.
//
// With validate, each of the two batches is first dry-run in full, then
// applied: the fewest requests a design that validates everything before
// writing anything can make.
func floorApply(ctx context.Context, base *rest.Config, w *workload, concurrency int, validate bool) (time.Duration, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = -1, 0
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	namespaces, rest, err := w.parsed()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for _, batch := range [][]*unstructured.Unstructured{namespaces, rest} {
		if validate {
			if err := applyAll(ctx, dyn, batch, concurrency, []string{metav1.DryRunAll}); err != nil {
				return 0, err
			}
		}
		if err := applyAll(ctx, dyn, batch, concurrency, nil); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// applyAll applies batch, concurrency objects at a time.
func applyAll(ctx context.Context, dyn dynamic.Interface, batch []*unstructured.Unstructured, concurrency int, dryRun []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, obj := range batch {
		g.Go(func() error {
			gvr := resources[obj.GetKind()]
			var ri dynamic.ResourceInterface = dyn.Resource(gvr)
			if ns := obj.GetNamespace(); ns != "" {
				ri = dyn.Resource(gvr).Namespace(ns)
			}
			_, err := ri.Apply(gctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "bench-floor", Force: true, DryRun: dryRun})
			if err != nil {
				return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
			}
			return nil
		})
	}
	return g.Wait()
}
