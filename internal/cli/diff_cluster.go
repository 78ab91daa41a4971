package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// clusterDiff is the agent's plan for the Sync o.sync, printed: it renders
// what the agent would apply (or o.revision, or the Sync's paths in the
// local checkout o.paths[0]), plans it against the Sync's inventory and
// dry-runs the apply and prune. Warnings, such as unreadable inventory
// entries, go to warn.
func clusterDiff(ctx context.Context, o *diffOptions, warn io.Writer) (*diffReport, error) {
	cs, err := prepareClusterSync(ctx, o.cluster, o.sync, o.budgets, syncSource{fromGit: len(o.paths) == 0, remote: true})
	if err != nil {
		return nil, err
	}
	defer cs.cleanup()
	s, key := cs.sync, client.ObjectKeyFromObject(cs.sync)
	if s.Spec.Suspend {
		fmt.Fprintf(warn, "Warning: Sync %s is suspended: the agent changes nothing until spec.suspend is false\n", key)
	}
	var objects []render.Object
	var to string
	if len(o.paths) > 0 {
		objects, to, err = renderLocalDir(s, o.paths[0], cs.Options)
	} else {
		objects, to, err = renderSyncRevision(ctx, cs, o.revision)
	}
	if err != nil {
		return nil, cs.Mask(err)
	}

	previous, unreadable, err := inventory.Read(ctx, cs.client, s)
	if err != nil {
		return nil, err
	}
	if unreadable != nil {
		fmt.Fprintf(warn, "Warning: Sync %s: %v; they are left out of the diff\n", key, unreadable)
	}
	secrets, err := engine.Redactor(cs.Variables, objects)
	if err != nil {
		return nil, err
	}
	res := engine.Run(ctx, cs.target, engine.Input{Sync: s, Objects: objects, Inventory: previous, DryRun: true})
	if res.Err != nil {
		return nil, fmt.Errorf("the agent would refuse to sync %s (%s): %w", to, res.Reason, secrets.Error(res.Err))
	}
	r := newDiffReport("live", to)
	r.secrets = secrets
	r.substituted = map[plan.ID]bool{}
	r.decrypted = decryptedIDs(objects)
	for _, obj := range objects {
		if len(obj.SecretVariables) > 0 {
			r.substituted[plan.ObjectID(obj)] = true
		}
	}
	if err := r.addChangeSet(res.Changes); err != nil {
		return nil, err
	}
	return r, nil
}

// remoteTimeout bounds each request of a diff to a Sync's remote
// cluster, so that a cluster that does not answer ends the diff.
const remoteTimeout = 30 * time.Second

// remoteTarget connects to the cluster s applies to (spec.kubeConfig),
// with the kubeconfig of its Secret, which c reads with the user's
// rights, impersonating spec.serviceAccountName there as the agent does,
// and returns that cluster's client and ropts with its kinds'
// scopes and its .Capabilities. Errors name the Secret and the server,
// never what the Secret holds.
func remoteTarget(ctx context.Context, c client.Client, s *v1alpha1.Sync, ropts engine.RenderOptions) (client.Client, engine.RenderOptions, error) {
	secret := client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.KubeConfig.SecretRef.Name}
	kc, err := engine.ReadKubeConfig(ctx, c, s)
	switch {
	case apierrors.IsForbidden(err):
		return nil, ropts, fmt.Errorf("the Sync %s applies to cluster %s, whose kubeconfig is in Secret %s, which you may not read: ask for get on that Secret to diff it", client.ObjectKeyFromObject(s), s.TargetCluster(), secret)
	case err != nil:
		return nil, ropts, fmt.Errorf("the Sync %s applies to another cluster: %w", client.ObjectKeyFromObject(s), err)
	}
	rc := rest.CopyConfig(kc.Config)
	rc.Timeout = remoteTimeout
	if sa := s.Spec.ServiceAccountName; sa != "" {
		// As the agent acts there: the kubeconfig's user impersonating
		// the Sync's ServiceAccount.
		rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + s.Namespace + ":" + sa}
	}
	cl, err := connectREST(rc, "")
	if err != nil {
		return nil, ropts, err
	}
	ropts.Scope = engine.MapperScope{Mapper: cl.mapper}
	if ropts.KubeVersion, ropts.APIVersions, err = engine.Capabilities(cl.discovery); err != nil {
		return nil, ropts, fmt.Errorf("connect to cluster %s, which Sync %s applies to: %w", cl.host, client.ObjectKeyFromObject(s), err)
	}
	return cl.client, ropts, nil
}

func parseSyncKey(s string) (client.ObjectKey, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("--sync %q: write the Sync as NAMESPACE/NAME, such as driftless-system/default", s)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// renderOptions are the options the agent would render a Sync with in
// the cluster of the flags: its kinds' scopes and its .Capabilities for
// charts (engine.Prepare adds the Sync's own).
func (f clusterFlags) renderOptions(budgets render.Budgets) (client.Client, engine.RenderOptions, error) {
	cl, err := f.connect()
	if err != nil {
		return nil, engine.RenderOptions{}, err
	}
	opts := engine.RenderOptions{Scope: engine.MapperScope{Mapper: cl.mapper}, Budgets: budgets}
	if opts.KubeVersion, opts.APIVersions, err = engine.Capabilities(cl.discovery); err != nil {
		return nil, engine.RenderOptions{}, fmt.Errorf("connect to the API server %s: %w", cl.host, err)
	}
	return cl.client, opts, nil
}

// renderSyncRevision renders, as the agent does, the revision the Sync
// follows, or revision when given (a full SHA, or a branch or tag of the
// Sync's repository). It returns the objects and the short revision.
func renderSyncRevision(ctx context.Context, cs *clusterSync, revision string) ([]render.Object, string, error) {
	req := cs.Request
	var rev string
	var err error
	if revision == "" {
		rev, err = source.Resolve(ctx, req)
	} else {
		req, rev, err = resolveRef(ctx, req, "--revision", revision)
	}
	if err != nil {
		return nil, "", err
	}
	tmp, err := os.MkdirTemp("", "driftless-diff-")
	if err != nil {
		return nil, "", err
	}
	defer source.RemoveTree(tmp)
	objects, _, err := engine.Render(ctx, cs.sync, req, rev, filepath.Join(tmp, "checkout"), cs.Options)
	if err != nil {
		return nil, "", err
	}
	return objects, source.Short(rev), nil
}

// renderLocalDir renders the Sync's paths in dir, a local checkout of its
// repository, as the agent would render them in git: the origins of the
// objects match those of a commit of the same files.
func renderLocalDir(s *v1alpha1.Sync, dir string, opts engine.RenderOptions) ([]render.Object, string, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, "", fmt.Errorf("--path %q is not a directory: pass a local checkout of the Sync's repository", dir)
	}
	objects, err := engine.RenderDir(context.Background(), s, dir, opts)
	if err != nil {
		where := "all of it"
		if len(s.Spec.Paths) > 0 {
			where = "the Sync's paths " + strings.Join(s.Spec.Paths, ", ")
		}
		return nil, "", fmt.Errorf("--path %s, rendering %s: %w", dir, where, err)
	}
	return objects, dir, nil
}
