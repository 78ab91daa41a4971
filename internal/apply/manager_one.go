package apply

import (
	"context"

	"github.com/driftless/driftless/internal/plan"
)

// ApplyOne brings one object back to its desired state: it compares it
// with the cluster through a server-side dry-run and applies it unless it
// is already equal, skipped by its annotations, or the Manager is a dry
// run. The Change carries the object before (Live, nil if it was deleted)
// and after (Applied), for attribution.
func (m *Manager) ApplyOne(ctx context.Context, s plan.Step) (Change, error) {
	r := m.dryRun(ctx, s)
	origin := s.Object.Origin.String()
	if r.err != nil {
		return Change{}, &ObjectError{ID: s.ID, Origin: origin, Err: r.err}
	}
	c := Change{ID: s.ID, Origin: origin, Action: r.action, Reason: r.reason, Adopted: r.adopted, Live: r.live, Applied: r.applied}
	if m.opts.DryRun || r.action == Unchanged || r.action == Skipped {
		return c, nil
	}
	_, err := m.write(ctx, []checked{r})
	return c, err
}
