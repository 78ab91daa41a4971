package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme returns a new scheme of client-go's kinds, this package's and
// CustomResourceDefinitions: the one every client of driftless's (the
// agent's, the commands', the dashboard's, the tests') is built with.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the schemes of these packages always register
		}
	}
	return s
}
