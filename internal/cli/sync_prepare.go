package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/charts"
)

// clusterSync is a Sync of the cluster with the front half of its
// pipeline assembled as the agent assembles it (engine.Prepare), read
// with the user's rights: diff --sync and build --sync render it.
type clusterSync struct {
	sync *v1alpha1.Sync
	// client reads the cluster of the Sync; target is the cluster the
	// Sync applies to (spec.kubeConfig's, or the same).
	client, target client.Client
	*engine.Prepared
	// cleanup removes the mirror of the Sync's remote bases.
	cleanup func()
}

// syncSource says which source a clusterSync renders: the Sync's own
// (fromGit), or the user's checkout, which needs no git Secret.
type syncSource struct {
	fromGit bool
	// remote, when set, fetches the remote bases of a Sync with
	// spec.kustomize.allowRemote, into a directory cleanup removes.
	remote bool
}

// prepareClusterSync reads the Sync name (NAMESPACE/NAME) of the
// cluster of flags and assembles what its render needs: its source
// request (with from.fromGit), variables and keys, the .Capabilities and
// kinds of the cluster it applies to, charts from repositories and
// registries (cached in chartCacheDir) and, with from.remote, its remote
// bases. Call cleanup when done.
func prepareClusterSync(ctx context.Context, flags clusterFlags, name string, budgets render.Budgets, from syncSource) (*clusterSync, error) {
	key, err := parseSyncKey(name)
	if err != nil {
		return nil, err
	}
	c, ropts, err := flags.renderOptions(budgets)
	if err != nil {
		return nil, err
	}
	var s v1alpha1.Sync
	if err := c.Get(ctx, key, &s); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("no Sync %s in the cluster: list the Syncs with kubectl get syncs -A", key)
		case meta.IsNoMatchError(err):
			return nil, fmt.Errorf("the cluster serves no Sync API: is driftless installed? (%w)", err)
		}
		return nil, fmt.Errorf("read Sync %s: %w", key, err)
	}
	// The Sync, its Inventory, variables and keys are in this cluster;
	// a Sync with spec.kubeConfig applies to another, rendered with that
	// cluster's kinds and version.
	cs := &clusterSync{sync: &s, client: c, target: c, cleanup: func() {}}
	if s.Spec.KubeConfig != nil {
		if cs.target, ropts, err = remoteTarget(ctx, c, &s, ropts); err != nil {
			return nil, err
		}
	}
	dir, err := chartCacheDir()
	if err != nil {
		return nil, err
	}
	id := engine.Identity{Reader: c, Options: ropts, Charts: &charts.Fetcher{Dir: dir}}
	if from.remote && s.Spec.Kustomize != nil && s.Spec.Kustomize.AllowRemote {
		dir, err := os.MkdirTemp("", "driftless-remote-")
		if err != nil {
			return nil, fmt.Errorf("directory for remote bases: %w", err)
		}
		cs.cleanup = func() { source.RemoveTree(dir) }
		id.Mirror, id.FileURLs = &source.Mirror{Dir: dir}, true
	}
	if from.fromGit {
		cs.Prepared, _, err = engine.Prepare(ctx, &s, id)
	} else {
		cs.Prepared, _, err = engine.PrepareRender(ctx, &s, source.Request{}, id)
	}
	if err != nil {
		cs.cleanup()
		return nil, fmt.Errorf("prepare the render of Sync %s: %w", key, err)
	}
	return cs, nil
}

// chartCacheDir is where diff and build keep the charts they fetch from
// repositories and registries: driftless/charts in the user's cache
// directory ($XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on
// macOS). Each chart is kept by a digest of its source, credentials and
// content, as in the agent's cache; nothing else in it is read.
func chartCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the charts of repositories: set $XDG_CACHE_HOME or $HOME (%w)", err)
	}
	return filepath.Join(dir, "driftless", "charts"), nil
}
