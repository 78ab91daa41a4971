package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Inventory is the record of the objects one Sync applied: the objects
// its syncs may have written, which it prunes once git drops them. It
// has the namespace and name of its Sync, is owned by it (deleted with
// it), and is written only by the agent, before a sync's first write and
// after each sync that changes the set.
//
// It is kept apart from the Sync's status so that writing the status
// (a sync's record, a drift incident) does not cost the API server and
// every watcher of Syncs a copy of an inventory-sized object. The Sync's
// status.inventoryRef names it and counts its entries.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=driftless
// +kubebuilder:printcolumn:name="Entries",type=integer,JSONPath=`.entryCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Inventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// EntryCount is len(entries), for kubectl get.
	// +optional
	EntryCount int `json:"entryCount,omitempty"`
	// Entries lists the objects; their order is not significant.
	// +optional
	// +listType=atomic
	Entries []InventoryEntry `json:"entries,omitempty"`
}

// InventoryList is a list of Inventories.
// +kubebuilder:object:root=true
type InventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Inventory `json:"items"`
}

// InventoryRef is where a Sync's inventory is: the Inventory of that name
// in the Sync's namespace.
type InventoryRef struct {
	// Name of the Inventory (the Sync's own name).
	Name string `json:"name"`
	// Entries is how many objects it listed when the status was written.
	Entries int `json:"entries"`
}
