// Package v1alpha1 holds the driftless.dev/v1alpha1 API: the Sync kind, and
// the labels and annotations driftless puts on, and reads from, the objects
// it manages.
//
// +kubebuilder:object:generate=true
// +groupName=driftless.dev
package v1alpha1
