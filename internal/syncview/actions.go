package syncview

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// RequestSync asks the agent to sync s now, as of now: it writes the
// request annotation, which the agent syncs on every change of. The
// error is the API server's when it refuses (such as RBAC's Forbidden),
// wrapped.
func RequestSync(ctx context.Context, c client.Client, s *v1alpha1.Sync, now time.Time) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.RequestedAtAnnotation: v1alpha1.FormatRequestedAt(now),
	}}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("request a sync of %s: %w", client.ObjectKeyFromObject(s), err)
	}
	return nil
}

// SetSuspend sets s's spec.suspend to suspend, and reports whether that
// changed it (false when it already was so; nothing is written then).
func SetSuspend(ctx context.Context, c client.Client, s *v1alpha1.Sync, suspend bool) (bool, error) {
	if s.Spec.Suspend == suspend {
		return false, nil
	}
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Suspend = suspend
	if err := c.Patch(ctx, s, patch); err != nil {
		return false, fmt.Errorf("set spec.suspend of Sync %s to %v: %w", client.ObjectKeyFromObject(s), suspend, err)
	}
	return true, nil
}
