package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

// syncManaging is a Sync whose status lists objects inventory entries,
// is Ready and not drifted, and holds one sync record and one incident.
func syncManaging(objects int) *v1alpha1.Sync {
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "fleet", ResourceVersion: "42", Generation: 3}}
	for i := range objects {
		s.Status.Inventory = append(s.Status.Inventory, v1alpha1.InventoryEntry{ID: fmt.Sprintf("apps/Deployment/shop/web-%05d", i), Version: "v1"})
	}
	s.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded, Message: "applied abc1234"},
		{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInSync, Message: "the cluster matches abc1234"},
	}
	s.Status.History = []v1alpha1.SyncRecord{{Revision: "abc1234", Result: v1alpha1.ResultSucceeded, Duration: "1s", Created: objects}}
	s.Status.Drift = []v1alpha1.DriftIncident{{Object: "Deployment/shop/web-00001", Action: v1alpha1.DriftReverted, Message: "reverted an earlier edit"}}
	return s
}

func TestAnIncidentIsRecordedWithAPatchThatDoesNotGrowWithTheInventory(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	reverted := v1alpha1.DriftIncident{Time: now, Object: "Deployment/shop/web-00007", Action: v1alpha1.DriftReverted,
		Message: "reverted spec.replicas: 5 → 2 (changed by kubectl-edit)"}
	reported := reverted
	reported.Action, reported.Message = v1alpha1.DriftReported, "drift (not reverted: dry run or selfHeal off) spec.replicas: 5 → 2"

	for _, tc := range []struct {
		name string
		inc  v1alpha1.DriftIncident
		// conditions: the patch carries the conditions, with Drifted as
		// drifted says.
		conditions, drifted bool
	}{
		{name: "a revert sends the incidents and leaves the conditions alone", inc: reverted},
		{name: "a drift left in place also says Drifted", inc: reported, conditions: true, drifted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sizes []int
			for _, objects := range []int{100, 10000} {
				s := syncManaging(objects)
				next, body, err := incidentPatch(s, tc.inc)
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(body))
				var got struct {
					Metadata metav1.ObjectMeta   `json:"metadata"`
					Status   v1alpha1.SyncStatus `json:"status"`
				}
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatal(err)
				}
				if got.Metadata.ResourceVersion != "42" {
					t.Errorf("%d objects: resourceVersion %q, want the one read (42) as a lock", objects, got.Metadata.ResourceVersion)
				}
				if strings.Contains(string(body), "inventory") || got.Status.History != nil {
					t.Errorf("%d objects: the patch carries more than the incidents and conditions: %s", objects, body)
				}
				if len(got.Status.Drift) != 2 || got.Status.Drift[0].Object != tc.inc.Object {
					t.Errorf("%d objects: status.drift = %+v, want the new incident before the earlier one", objects, got.Status.Drift)
				}
				if (got.Status.Conditions != nil) != tc.conditions {
					t.Errorf("%d objects: conditions in the patch: %+v, want them: %t", objects, got.Status.Conditions, tc.conditions)
				}
				if tc.conditions {
					if meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionDrifted) != tc.drifted ||
						!meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
						t.Errorf("%d objects: conditions %+v, want Ready kept and Drifted %t", objects, got.Status.Conditions, tc.drifted)
					}
				}
				if len(next.Drift) != 2 || next.Inventory != nil || len(next.Conditions) != 2 {
					t.Errorf("%d objects: the status once patched is %+v, want two incidents, no inventory and two conditions", objects, next)
				}
				if len(s.Status.Drift) != 1 || len(s.Status.Conditions) != 2 || s.Status.Conditions[1].Status != metav1.ConditionFalse {
					t.Errorf("%d objects: the Sync read was changed: %+v", objects, s.Status)
				}
			}
			if sizes[0] != sizes[1] {
				t.Errorf("the patch takes %d bytes at 100 objects and %d at 10,000, want the same", sizes[0], sizes[1])
			}
		})
	}
}
