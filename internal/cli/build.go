package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// buildOptions are the flags of `driftless build`.
type buildOptions struct {
	repo            string
	paths           []string
	targetNamespace string
	sync            string
	kubeconfig      string
	output          string
	timeout         time.Duration
	budgets         render.Budgets
	allowRemote     bool
}

func newBuildCommand() *cobra.Command {
	o := &buildOptions{}
	cmd := &cobra.Command{
		Use:   "build --repo DIR [--path P]... [--sync NAMESPACE/NAME]",
		Short: "Print the objects driftless would apply from a directory, with where each came from",
		Long: `Print the objects the agent would render from the files in a directory, as
kustomize build and flux build do: plain manifests and kustomizations, every
object with its namespace defaulted and its driftless.dev/origin annotation.
Nothing is written and, without --sync, no cluster is needed.

  --repo   the top directory of a checkout of the repository. Its files are
           read as they are, uncommitted work included; origins are paths
           relative to it, as in git.
  --path   directories or files in it to render, like a Sync's spec.paths
           (default: all of it). Repeat the flag or separate with commas.
  --sync   render as the Sync NAMESPACE/NAME of the cluster would: its
           spec.paths, targetNamespace, substitute and substituteFrom (its
           ConfigMaps and Secrets are read) and the sync label; kinds are
           scoped by the cluster's discovery; charts from HTTP Helm
           repositories and OCI registries are fetched as the agent
           fetches them, kept in driftless/charts of the user's cache
           directory (~/.cache on Linux, $XDG_CACHE_HOME when set).
           --path and --target-namespace are then refused: the Sync says.
  --allow-remote
           fetch the remote bases of git form that kustomizations name
           (https://host/org/repo//path?ref=v1, ssh://, git@host:…, file://),
           as the agent does for a Sync with spec.kustomize.allowRemote,
           anonymously, into a temporary directory removed afterwards.
           Without it remote bases are
           refused; with --sync the Sync's allowRemote must be on as well.
           Without --sync, this is the only network build uses.

Without --sync, which built-in kinds are cluster-scoped is known, a custom
kind takes its scope from a CustomResourceDefinition rendered with it, and
every other kind is taken as namespaced; ${...} are left as they are.
Values substituted from a Secret print as "***".

Output (--output yaml): the objects as YAML documents separated by "---",
each preceded by "# Source: <origin>". --output json prints a v1 List of
the objects.

Exit status:
  0  rendered
  2  error: files that do not render (the file, line and object are
     named), wrong flags, a Sync or cluster that cannot be read`,
		Example: `  # What does workloads/ of my clone render to?
  driftless build --repo . --path workloads

  # An overlay, with objects that name no namespace put in shop
  driftless build --repo ./fleet --path apps/web/overlays/production --target-namespace shop

  # Exactly what the Sync shop/web would apply from my clone, variables included
  driftless build --repo ./fleet --sync shop/web

  # Check in CI that everything renders, and count the objects
  driftless build --repo . -o json | jq '.items | length'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBuild(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.repo, "repo", "", "the top directory of a checkout of the repository (required)")
	f.StringSliceVar(&o.paths, "path", nil, "directories or files in --repo to render, like a Sync's spec.paths (default: all of it)")
	f.StringVar(&o.targetNamespace, "target-namespace", "", `namespace of namespaced objects that name none, as a Sync's spec.targetNamespace (default "default")`)
	f.StringVar(&o.sync, "sync", "", "render as this Sync of the cluster would, as NAMESPACE/NAME: its paths, targetNamespace and variables")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --sync: "+kubeconfigUsage)
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml or json")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "fetch the remote Kustomize bases of git form that kustomizations name, anonymously, as a Sync with spec.kustomize.allowRemote does (without --sync, the only network build uses)")
	addBudgetFlags(f, &o.budgets)
	return cmd
}

// runBuild renders what o asks for and writes it to out.
func runBuild(ctx context.Context, o *buildOptions, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	objects, vars, err := o.render(ctx)
	if err != nil {
		return err
	}
	secrets, err := engine.Redactor(vars, objects)
	if err != nil {
		return err
	}
	shown := make([]map[string]any, len(objects))
	for i, obj := range objects {
		u, err := obj.Decode()
		if err != nil {
			return err
		}
		secrets.Value(u.Object)
		if obj.Decrypted {
			maskDecrypted(nil, u.Object)
		}
		shown[i] = u.Object
	}
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": shown})
	}
	for i, obj := range objects {
		data, err := yaml.Marshal(shown[i])
		if err != nil {
			return fmt.Errorf("%s: %w", obj.Origin, err)
		}
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		fmt.Fprintf(out, "# Source: %s\n%s", obj.Origin, data)
	}
	return nil
}

func (o *buildOptions) validate() error {
	switch {
	case o.repo == "":
		return errors.New("--repo is required: pass the top directory of a checkout of the repository (--repo=. for the current directory)")
	case o.output != "yaml" && o.output != "json":
		return fmt.Errorf("--output %q: use yaml or json", o.output)
	case o.sync != "" && (len(o.paths) > 0 || o.targetNamespace != ""):
		return errors.New("--path and --target-namespace are refused with --sync: the Sync's spec.paths and spec.targetNamespace are rendered")
	case o.sync == "" && o.kubeconfig != "":
		return errors.New("--kubeconfig is for --sync: without it build needs no cluster")
	}
	if fi, err := os.Stat(o.repo); err != nil || !fi.IsDir() {
		return fmt.Errorf("--repo %q is not a directory: pass the top directory of a checkout of the repository", o.repo)
	}
	return nil
}

// render renders o.repo, offline or as o.sync would, and returns the
// variables it substituted.
func (o *buildOptions) render(ctx context.Context) ([]render.Object, map[string]render.Variable, error) {
	if o.sync != "" {
		cs, err := prepareClusterSync(ctx, clusterFlags{kubeconfig: o.kubeconfig}, o.sync, o.budgets, syncSource{remote: o.allowRemote})
		if err != nil {
			return nil, nil, err
		}
		defer cs.cleanup()
		objects, err := engine.RenderDir(ctx, cs.sync, o.repo, cs.Options)
		return objects, cs.Variables, cs.Mask(err)
	}
	decrypt, err := localDecryptor()
	if err != nil {
		return nil, nil, err
	}
	opts := render.Options{
		Decrypt:         decrypt,
		Root:            o.repo,
		Paths:           o.paths,
		TargetNamespace: o.targetNamespace,
		Scope:           engine.BuiltinScope{},
		Budgets:         o.budgets,
		Kustomize:       render.KustomizeOptions{AllowRemote: o.allowRemote},
	}
	if o.allowRemote {
		dir, err := os.MkdirTemp("", "driftless-build-remote-")
		if err != nil {
			return nil, nil, fmt.Errorf("directory for remote bases: %w", err)
		}
		defer source.RemoveTree(dir)
		remote := &engine.RemoteBases{Mirror: &source.Mirror{Dir: dir}, FileURLs: true}
		opts.Remote = remote.Fetcher(ctx, nil)
	}
	objects, err := render.Render(opts)
	return objects, nil, err
}

// maskLikeDesired hides, in the live object, the old form of every string
// that holds a masked Secret value in the desired one: after a Secret is
// rotated, the live object still holds the old value, which the render's
// Secret values (engine.Redactor, knowing only the new one) would not
// hide. Such a string shows as "***" when it differs from the desired one.
func maskLikeDesired(live, desired any) any {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return live
		}
		for k, dv := range d {
			if lv, ok := l[k]; ok {
				l[k] = maskLikeDesired(lv, dv)
			}
		}
		return l
	case []any:
		l, ok := live.([]any)
		if !ok {
			return live
		}
		for i := range min(len(l), len(d)) {
			l[i] = maskLikeDesired(l[i], d[i])
		}
		return l
	case string:
		if strings.Contains(d, maskedValue) && live != any(d) {
			return maskedValue
		}
	}
	return live
}
