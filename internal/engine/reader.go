package engine

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reader reads the Secrets and ConfigMaps a Sync names: its git and
// trusted keys Secrets, spec.substituteFrom, spec.decryption, and its
// HelmCharts' valuesFrom and chart secretRef. The caller decides whose
// identity it reads with: the agent reads a tenant Sync's as the Sync's
// ServiceAccount, so that a Sync never reads what that account may not
// (docs/security.md). It must not cache: Secrets are never cached.
type Reader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

var _ Reader = client.Reader(nil)
