package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "driftless.dev", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Sync{}, &SyncList{}, &ImagePolicy{}, &ImagePolicyList{}, &Inventory{}, &InventoryList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
