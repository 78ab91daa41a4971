package testenv

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
)

// Scheme returns v1alpha1.NewScheme(), the agent's: client-go's kinds,
// driftless's and CustomResourceDefinitions. Tests build their clients
// with it.
func Scheme() *runtime.Scheme {
	return v1alpha1.NewScheme()
}

// InstallCRDs creates defs (config/crd's, usually; one that exists is
// kept) and waits until each is Established (crd.WaitEstablished).
func (e *Env) InstallCRDs(ctx context.Context, defs ...*apiextensionsv1.CustomResourceDefinition) error {
	c, err := client.New(e.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	for _, def := range defs {
		if err := c.Create(ctx, def.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("install the %s CRD: %w", def.Spec.Names.Kind, err)
		}
	}
	for _, def := range defs {
		if err := crd.WaitEstablished(ctx, c, def.Name); err != nil {
			return err
		}
	}
	return nil
}
