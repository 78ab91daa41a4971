package controller

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/driftless/driftless/api/v1alpha1"
)

// checkDependencies returns DependencyNotReady naming the first
// dependency that is not Ready at its latest revision, or DependencyCycle
// when following dependsOn leads back to s.
func (r *SyncReconciler) checkDependencies(ctx context.Context, s *v1alpha1.Sync) (string, error) {
	if len(s.Spec.DependsOn) == 0 {
		return "", nil
	}
	self := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if cycle := r.findCycle(ctx, self, s, []types.NamespacedName{self}, map[types.NamespacedName]bool{}); cycle != nil {
		names := make([]string, len(cycle))
		for i, n := range cycle {
			names[i] = n.String()
		}
		return v1alpha1.ReasonDependencyCycle, fmt.Errorf("dependsOn forms a cycle: %s; remove one of these dependencies", strings.Join(names, " → "))
	}
	for _, d := range s.Spec.DependsOn {
		key := dependencyKey(s.Namespace, d)
		var dep v1alpha1.Sync
		if err := r.Client.Get(ctx, key, &dep); err != nil {
			return v1alpha1.ReasonDependencyNotReady, fmt.Errorf("dependency Sync %s: %w", key, err)
		}
		if why := notReady(&dep); why != "" {
			return v1alpha1.ReasonDependencyNotReady, fmt.Errorf("waiting for dependency Sync %s: %s", key, why)
		}
	}
	return "", nil
}

// notReady says why a dependency is not Ready at its latest revision, or
// "" when it is.
func notReady(dep *v1alpha1.Sync) string {
	ready := meta.FindStatusCondition(dep.Status.Conditions, v1alpha1.ConditionReady)
	switch {
	case dep.Status.ObservedGeneration != dep.Generation:
		return "its latest spec has not been synced yet"
	case ready == nil || ready.Status != "True":
		if ready != nil {
			return fmt.Sprintf("it is not Ready (%s: %s)", ready.Reason, ready.Message)
		}
		return "it has not synced yet"
	case dep.Status.LastAppliedRevision != dep.Status.LastAttemptedRevision:
		return "its latest revision is not applied yet"
	}
	return ""
}

func dependencyKey(namespace string, d v1alpha1.DependencyReference) types.NamespacedName {
	if d.Namespace != "" {
		namespace = d.Namespace
	}
	return types.NamespacedName{Namespace: namespace, Name: d.Name}
}

// findCycle walks dependsOn depth-first from s and returns the path back
// to self, if any.
func (r *SyncReconciler) findCycle(ctx context.Context, self types.NamespacedName, s *v1alpha1.Sync, path []types.NamespacedName,
	visited map[types.NamespacedName]bool) []types.NamespacedName {
	for _, d := range s.Spec.DependsOn {
		key := dependencyKey(s.Namespace, d)
		if key == self {
			return append(append([]types.NamespacedName{}, path...), key)
		}
		if visited[key] {
			continue
		}
		visited[key] = true
		var dep v1alpha1.Sync
		if r.Client.Get(ctx, key, &dep) != nil {
			continue
		}
		if c := r.findCycle(ctx, self, &dep, append(path, key), visited); c != nil {
			return c
		}
	}
	return nil
}

// dependsOnIndex indexes Syncs, in the manager's cache, by each Sync
// their spec.dependsOn names ("namespace/name"): a Sync that depends on
// none has no entry.
const dependsOnIndex = "driftless.dev/dependsOn"

// dependsOnKeys is dependsOnIndex's value for a Sync: the Syncs it
// depends on.
func dependsOnKeys(obj client.Object) []string {
	s, ok := obj.(*v1alpha1.Sync)
	if !ok || len(s.Spec.DependsOn) == 0 {
		return nil
	}
	out := make([]string, len(s.Spec.DependsOn))
	for i, d := range s.Spec.DependsOn {
		out[i] = dependencyKey(s.Namespace, d).String()
	}
	return out
}

// dependents maps a Sync to the Syncs that depend on it, so that they
// sync as soon as it becomes Ready. Every Sync's status write comes
// here: it reads the index, not every Sync of the cache (a list of 2,500
// Syncs held 10 MB for each status write of each of them).
func (r *SyncReconciler) dependents(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.SyncList
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if err := r.Client.List(ctx, &list, client.MatchingFields{dependsOnIndex: key.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, s := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
	return out
}
