package controller

import (
	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/source"
)

// commitOf is the subject and author of revision, read from the git
// mirror; empty when the mirror does not hold it (a failed fetch).
func (r *SyncReconciler) commitOf(req source.Request, revision string) source.Commit {
	c, err := r.Mirror().Commit(req, revision, v1alpha1.MaxSubject)
	if err != nil {
		return source.Commit{}
	}
	return c
}

// recordChanges lists the objects of cs that were created, configured or
// pruned, at most v1alpha1.MaxRecordChanges of them, in the order of cs,
// and counts the rest.
func recordChanges(cs apply.ChangeSet) ([]v1alpha1.ObjectChange, int) {
	var out []v1alpha1.ObjectChange
	more := 0
	for _, c := range cs {
		switch c.Action {
		case apply.Created, apply.Configured, apply.Pruned:
		default:
			continue
		}
		if len(out) == v1alpha1.MaxRecordChanges {
			more++
			continue
		}
		out = append(out, v1alpha1.ObjectChange{Action: string(c.Action), Object: c.ID.String()})
	}
	return out, more
}
