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
	// Digests records what the agent last verified of each entry, in the
	// order of entries, so that a restarted agent compares only what may
	// differ: "v1:" and the base64 (standard encoding) of 16 bytes per
	// entry — 8 of the SHA-256 of the desired object's JSON as rendered,
	// then 8 of the SHA-256 of the live object's UID and managedFields
	// (status writers' left out) as the agent last found it equal to that
	// render. Sixteen zero bytes: nothing known of that entry. Anything
	// else (absent, another prefix, another length) tells nothing, and
	// the next agent to start compares every object.
	// +optional
	Digests string `json:"digests,omitempty"`
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
