package syncview

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

// DriftWindow is how far back Row.DriftLast24h counts drift incidents.
const DriftWindow = 24 * time.Hour

// Row is one Sync as a list shows it; its JSON names are stable (the
// output of `driftless get syncs -o json`).
type Row struct {
	// Context is the kubeconfig context, when several are listed.
	Context   string `json:"context,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Cluster is the cluster the Sync applies to (Sync.TargetCluster):
	// "in-cluster", or the server of its spec.kubeConfig.
	Cluster string `json:"cluster"`
	// Revision is status.lastAppliedRevision, the full SHA.
	Revision string `json:"revision"`
	// Ready, Reason and Message are the Ready condition's; Ready is
	// "Unknown" when the Sync has none yet.
	Ready   string `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// LastSyncAt is when the newest recorded sync started.
	LastSyncAt *metav1.Time `json:"lastSyncAt,omitempty"`
	Objects    int          `json:"objects"`
	// DriftLast24h counts drift incidents of the last 24 hours;
	// DriftIncidents all that the Sync keeps.
	DriftLast24h   int  `json:"driftLast24h"`
	DriftIncidents int  `json:"driftIncidents"`
	Suspended      bool `json:"suspended"`
	// Hold is status.hold: the Sync is held at Revision (driftless hold).
	Hold *v1alpha1.HoldStatus `json:"hold,omitempty"`
}

// NewRow is s as a row, its drift counted back from now.
func NewRow(s *v1alpha1.Sync, now time.Time) Row {
	r := Row{
		Namespace:      s.Namespace,
		Name:           s.Name,
		Cluster:        s.TargetCluster(),
		Revision:       s.Status.LastAppliedRevision,
		Objects:        ObjectCount(s),
		DriftIncidents: len(s.Status.Drift),
		Suspended:      s.Spec.Suspend,
		Hold:           s.Status.Hold,
	}
	r.Ready, r.Reason, r.Message = ReadyOf(s)
	if len(s.Status.History) > 0 {
		t := s.Status.History[0].StartedAt
		r.LastSyncAt = &t
	}
	for _, d := range s.Status.Drift {
		if now.Sub(d.Time.Time) < DriftWindow {
			r.DriftLast24h++
		}
	}
	return r
}

// ReadyOf is the Ready status, reason and message of s; "Unknown" when it
// has none.
func ReadyOf(s *v1alpha1.Sync) (status, reason, message string) {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return "Unknown", "", ""
	}
	return string(c.Status), c.Reason, c.Message
}

// ObjectCount is how many objects s's inventory lists, as its status
// counts them (or lists them, as agents before the Inventory kind did).
func ObjectCount(s *v1alpha1.Sync) int {
	if s.Status.InventoryRef != nil && len(s.Status.Inventory) == 0 {
		return s.Status.InventoryRef.Entries
	}
	return len(s.Status.Inventory)
}
