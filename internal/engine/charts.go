package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/charts"
)

// repositoryCharts fetches the charts of HelmCharts from HTTP Helm
// repositories and OCI registries for one sync: with its context, and the
// credentials of each HelmChart's secretRef in the Sync's namespace.
type repositoryCharts struct {
	ctx       context.Context
	reader    Reader
	namespace string
	fetcher   *charts.Fetcher
	hosts     source.Hosts
}

func (f repositoryCharts) FetchChart(req render.ChartRequest) (render.FetchedChart, error) {
	c := req.Chart
	ref := charts.Ref{Repository: c.Repository, OCI: c.OCI, Name: c.Name, Version: c.Version, Hosts: f.hosts}
	if c.SecretRef != nil {
		if f.reader == nil {
			return render.FetchedChart{}, errors.New("spec.chart.secretRef needs the cluster: use driftless build --sync")
		}
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: f.namespace, Name: c.SecretRef.Name}
		if err := f.reader.Get(f.ctx, key, &secret); err != nil {
			if apierrors.IsNotFound(err) {
				return render.FetchedChart{}, fmt.Errorf("spec.chart.secretRef %s does not exist in the Sync's namespace", key)
			}
			return render.FetchedChart{}, fmt.Errorf("read spec.chart.secretRef %s: %w", key, err)
		}
		ref.Credentials = charts.CredentialsFromSecret(secret.Data)
	}
	got, err := f.fetcher.Fetch(f.ctx, ref)
	if err != nil {
		return render.FetchedChart{}, err
	}
	return render.FetchedChart{Path: got.Path, Version: got.Version, Digest: got.Digest}, nil
}

// readOutside tells that a chart was fetched from outside the checkout.
type readOutside struct {
	render.ChartFetcher
	outside func()
}

func (f readOutside) FetchChart(req render.ChartRequest) (render.FetchedChart, error) {
	f.outside()
	return f.ChartFetcher.FetchChart(req)
}
