package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/driftless/driftless/internal/render"
)

// diffOptions are the flags of `driftless diff`.
type diffOptions struct {
	output  string
	timeout time.Duration
	// paths is --path: with --sync one local checkout to render instead
	// of git; with --repo the paths in the repository to render.
	paths []string

	// Against a cluster.
	sync     string
	cluster  clusterFlags
	revision string

	// Offline.
	repo            string
	from, to        string
	targetNamespace string

	// budgets bound each render, as the agent's --render-max-* do.
	budgets render.Budgets
	// decrypt decrypts SOPS files offline, with the age identities of the
	// environment (localDecryptor).
	decrypt render.Decryptor
}

func newDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff (--sync NAMESPACE/NAME | --repo URL|DIR --from REF --to REF)",
		Short: "Show what a sync would change, object by object, without changing anything",
		Long: `Show, object by object, what driftless would change. Nothing is written.

Against a cluster (--sync NAMESPACE/NAME), diff reads the Sync, fetches the
revision it follows, renders it exactly as the agent does and asks the API
server for a server-side dry-run of every object. It prints how each object
in the cluster would change, the objects that would be created, and the
objects that would be pruned (none when the Sync has prune: false).
  --revision  diff a full commit SHA, or a branch or tag of the Sync's
              repository, instead of the ref the Sync follows.
  --path      diff a local checkout of the Sync's repository instead of
              git, uncommitted work included: the Sync's paths in it are
              rendered as the agent would render them once committed.
Charts from HTTP Helm repositories and OCI registries, and the remote
Kustomize bases of a Sync with spec.kustomize.allowRemote, are fetched as
the agent fetches them; charts are kept in driftless/charts of the user's
cache directory (~/.cache on Linux, $XDG_CACHE_HOME when set).
The kubeconfig's user must be able to read the Sync and its git Secret
(and a HelmChart's spec.chart.secretRef) and to patch the objects (only as
a dry-run).

Offline (--repo URL|DIR --from REF --to REF), diff needs no cluster: it
renders two revisions of a repository and prints the objects added, removed
and modified between them, for reviewing a pull request in CI. --path picks
the paths in the repository to render, like a Sync's spec.paths.
  --repo      a local clone (private repositories: use the clone your CI
              checked out), or a file://, http:// or https:// URL of a
              public repository.
  --from/--to a branch, a tag or a full commit SHA, tried in that order. In
              a local clone anything git can resolve works too: HEAD,
              origin/main, a short SHA.
Without a cluster, diff knows which built-in kinds are cluster-scoped and
takes the scope of a custom kind from a CustomResourceDefinition rendered
with it; every other kind is taken as namespaced.

In both modes the diffs leave out fields the API server manages
(managedFields, resourceVersion, generation, uid, creationTimestamp,
status) and the revision in the driftless.dev/origin annotation. Secret
values are never printed: each shows as "***", or "*** (changed)" where
it differs.

Output (--output text): one block per object that would change, headed
"+ Kind/namespace/name (file#document)" for a create, "~ …" for an update
and "- …" for a prune or removal, then a unified diff of its YAML; last,
a summary line such as "2 to create, 1 to change, 1 to prune, 40 unchanged".
--output json prints the same as one JSON object.

Exit status:
  0  no changes
  1  changes
  2  error: wrong flags, cluster or repository unreachable, manifests that
     do not render, objects the API server refuses (the files are named)`,
		Example: `  # What would the agent change for the Sync shop/web?
  driftless diff --sync shop/web

  # ... if the Sync followed the branch more-memory instead?
  driftless diff --sync shop/web --revision more-memory

  # ... if it applied my uncommitted work in my clone ./fleet?
  driftless diff --sync shop/web --path ./fleet

  # In CI, no cluster: what does this pull request change under workloads/?
  driftless diff --repo . --from origin/main --to HEAD --path workloads

  # Two tags of a public repository, as JSON
  driftless diff --repo https://github.com/example/fleet.git --from v1.2.0 --to v1.3.0 -o json

  # Fail a CI step only on errors, not on changes
  driftless diff --repo . --from origin/main --to HEAD || [ $? -eq 1 ]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDiff(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.sync, "sync", "", "the Sync to diff against the cluster, as NAMESPACE/NAME")
	f.StringVar(&o.cluster.kubeconfig, "kubeconfig", "", "with --sync: "+kubeconfigUsage)
	f.StringVar(&o.cluster.context, "context", "", "with --sync: "+contextUsage)
	f.StringVar(&o.revision, "revision", "", "with --sync: a full commit SHA, or a branch or tag of the Sync's repository (a tag or sha256: digest for an OCI Sync), to diff instead of the Sync's ref")
	f.StringSliceVar(&o.paths, "path", nil, "with --sync: a local checkout of the Sync's repository to render instead of git; with --repo: comma-separated paths in the repository (default: all of it)")
	f.StringVar(&o.repo, "repo", "", "offline: a local clone, or a file:// or public http(s):// repository URL")
	f.StringVar(&o.from, "from", "", "offline: the branch, tag or commit to diff from")
	f.StringVar(&o.to, "to", "", "offline: the branch, tag or commit to diff to")
	f.StringVar(&o.targetNamespace, "target-namespace", "", `offline: namespace of namespaced objects that name none, as a Sync's spec.targetNamespace (default "default")`)
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	addBudgetFlags(f, &o.budgets)
	return cmd
}

// errDiffChanges is returned, wrapped in an exitError without a message,
// when the diff found changes: the process exits 1 and prints no error.
var errDiffChanges = &exitError{code: 1}

// runDiff computes the diff o asks for, writes it to out and returns
// errDiffChanges when there are changes. Warnings go to errOut.
func runDiff(ctx context.Context, o *diffOptions, out, errOut io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	view, err := newDiffView(o.output)
	if err != nil {
		return err
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	var r *diffReport
	if o.sync != "" {
		r, err = clusterDiff(ctx, o, errOut)
	} else {
		r, err = offlineDiff(ctx, o)
	}
	if err != nil {
		return err
	}
	if err := view.Render(out, r); err != nil {
		return err
	}
	if r.hasChanges() {
		return errDiffChanges
	}
	return nil
}

// validate checks that the flags name exactly one mode and only its flags.
func (o *diffOptions) validate() error {
	switch {
	case o.sync != "" && o.repo != "":
		return errors.New("--sync and --repo exclude each other: use --sync to diff against a cluster, --repo to diff two revisions offline")
	case o.sync == "" && o.repo == "":
		return errors.New("nothing to diff: pass --sync NAMESPACE/NAME to diff against a cluster, or --repo with --from and --to to diff two revisions offline")
	case o.sync != "":
		var offline []error
		for _, f := range []struct{ name, value string }{{"--from", o.from}, {"--to", o.to}, {"--target-namespace", o.targetNamespace}} {
			if f.value != "" {
				offline = append(offline, fmt.Errorf("%s is for offline diffs (--repo); with --sync the Sync says what to render", f.name))
			}
		}
		if err := errors.Join(offline...); err != nil {
			return err
		}
		if o.revision != "" && len(o.paths) > 0 {
			return errors.New("--revision and --path exclude each other: diff a revision of git, or a local checkout")
		}
		if len(o.paths) > 1 {
			return fmt.Errorf("--path with --sync takes one local checkout, not %d directories", len(o.paths))
		}
	default:
		if o.from == "" || o.to == "" {
			return errors.New("--repo needs --from and --to: the two branches, tags or commits to compare")
		}
		if o.revision != "" || o.cluster != (clusterFlags{}) {
			return errors.New("--revision, --kubeconfig and --context are for diffs against a cluster (--sync); offline, use --from and --to")
		}
	}
	return nil
}
