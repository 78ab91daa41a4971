package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
)

// pruned is the outcome for one prune entry.
type pruned struct {
	change *Change
	err    error
}

// Prune deletes the objects of entries (in their order, rank by rank) that
// still exist, carry this Manager's owner label and have not opted out
// with driftless.dev/prune: disabled; the others are reported as Skipped.
// Objects already gone are left out of the ChangeSet. It attempts every
// entry and returns the errors of those it could not delete, which stay
// in the inventory for the next sync (see inventory.FailedPrunes).
func (m *Manager) Prune(ctx context.Context, entries []plan.Entry) (ChangeSet, error) {
	results := byRank(ctx, m, entries, func(e plan.Entry) plan.Rank { return plan.RankOf(e.ID) }, m.pruneOne)
	var cs ChangeSet
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, &ObjectError{ID: entries[i].ID, Err: fmt.Errorf("prune failed: %w", r.err)})
			continue
		}
		if r.change != nil {
			cs = append(cs, *r.change)
		}
	}
	return cs, errors.Join(errs...)
}

func (m *Manager) pruneOne(ctx context.Context, e plan.Entry) pruned {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: e.ID.Group, Version: e.Version, Kind: e.ID.Kind})
	err := m.client.Get(ctx, client.ObjectKey{Namespace: e.ID.Namespace, Name: e.ID.Name}, obj)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		// Gone, or its kind is no longer served (its CRD was deleted):
		// nothing left to prune.
		return pruned{}
	case err != nil:
		return pruned{err: err}
	}
	origin := obj.GetAnnotations()[v1alpha1.OriginAnnotation]
	skip := func(reason string) pruned {
		return pruned{change: &Change{ID: e.ID, Origin: origin, Action: Skipped, Reason: reason}}
	}
	if owner := obj.GetLabels()[v1alpha1.SyncLabel]; owner != m.opts.Owner {
		return skip(fmt.Sprintf("not pruned: label %s is %q, not %q; another owner manages it now", v1alpha1.SyncLabel, owner, m.opts.Owner))
	}
	if obj.GetAnnotations()[v1alpha1.PruneAnnotation] == v1alpha1.Disabled {
		return skip("not pruned: " + v1alpha1.PruneAnnotation + ": disabled")
	}
	if m.opts.DryRun {
		return pruned{change: &Change{ID: e.ID, Origin: origin, Action: Pruned, Live: obj}}
	}
	uid := obj.GetUID()
	err = m.client.Delete(ctx, obj, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) {
		return pruned{err: err}
	}
	return pruned{change: &Change{ID: e.ID, Origin: origin, Action: Pruned}}
}
