package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/syncview"
	"golang.org/x/sync/errgroup"
)

// contextError is a kubeconfig context whose Syncs could not be listed;
// its JSON names are stable.
type contextError struct {
	Context string `json:"context"`
	// Status is Unreachable (no answer within the timeout) or Error (the
	// API server answered with an error, such as no Sync API or no
	// permission).
	Status string `json:"status"`
	Error  string `json:"error"`
}

// contextSyncs is what one context answered.
type contextSyncs struct {
	name  string
	syncs []v1alpha1.Sync
	err   *contextError
}

// listAllContexts lists the Syncs of every context of the kubeconfig at
// once, each within timeout. A context that fails is returned as a
// contextError; the others are listed all the same.
func listAllContexts(ctx context.Context, o *getOptions) ([]contextSyncs, error) {
	names, err := contextNames(o.cluster.kubeconfig)
	if err != nil {
		return nil, err
	}
	out := make([]contextSyncs, len(names))
	g := errgroup.Group{}
	g.SetLimit(8)
	for i, name := range names {
		g.Go(func() error {
			out[i] = listContext(ctx, clusterFlags{kubeconfig: o.cluster.kubeconfig, context: name}, o, name)
			return nil
		})
	}
	_ = g.Wait()
	return out, nil
}

// contextNames are the names of every context of the kubeconfig, sorted,
// for --all-contexts.
func contextNames(kubeconfig string) ([]string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	raw, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w; pass --kubeconfig with a readable kubeconfig file", err)
	}
	if len(raw.Contexts) == 0 {
		return nil, &exitError{code: 2, err: errors.New("--all-contexts: the kubeconfig has no contexts; `kubectl config get-contexts` lists them")}
	}
	names := make([]string, 0, len(raw.Contexts))
	for name := range raw.Contexts {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// listContext lists the Syncs of one context: of its namespace, of -n,
// or of every namespace with -A.
func listContext(ctx context.Context, f clusterFlags, o *getOptions, name string) contextSyncs {
	fail := func(err error) contextSyncs {
		status := "Unreachable"
		if isAPIAnswer(err) {
			status = "Error"
		}
		return contextSyncs{name: name, err: &contextError{Context: name, Status: status, Error: err.Error()}}
	}
	cfg, err := f.load()
	if err != nil {
		return fail(err)
	}
	cfg.rest.Timeout = o.contextTimeout
	c, err := client.New(cfg.rest, client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		return fail(fmt.Errorf("connect to the API server %s: %w", cfg.rest.Host, err))
	}
	ns := cfg.namespace
	switch {
	case o.allNamespaces:
		ns = ""
	case o.namespace != "":
		ns = o.namespace
	}
	ctx, cancel := context.WithTimeout(ctx, o.contextTimeout)
	defer cancel()
	var list v1alpha1.SyncList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return fail(listError(err, cfg.rest.Host))
	}
	return contextSyncs{name: name, syncs: list.Items}
}

// isAPIAnswer reports whether err is an answer of the API server (no Sync
// API, forbidden, …) rather than no answer.
func isAPIAnswer(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) || meta.IsNoMatchError(err)
}

// runGetSyncsAllContexts prints the Syncs of every context, and the
// contexts that could not be listed. It fails only when none could.
func runGetSyncsAllContexts(ctx context.Context, o *getOptions, v view[syncList], out io.Writer) error {
	switch {
	case o.watch:
		return &exitError{code: 2, err: errors.New("--all-contexts and --watch: pass one of them")}
	case o.cluster.context != "":
		return &exitError{code: 2, err: fmt.Errorf("--all-contexts and --context %s: pass one of them", o.cluster.context)}
	}
	results, err := listAllContexts(ctx, o)
	if err != nil {
		return err
	}
	now := time.Now()
	l := syncList{Syncs: []syncRow{}, allNamespaces: o.allNamespaces, contexts: true, now: now, colour: painter(isTerminal(out))}
	for _, r := range results {
		if r.err != nil {
			l.Unreachable = append(l.Unreachable, *r.err)
			continue
		}
		rows := make([]syncRow, 0, len(r.syncs))
		for i := range r.syncs {
			row := syncview.NewRow(&r.syncs[i], now)
			row.Context = r.name
			rows = append(rows, row)
		}
		sort.Slice(rows, func(i, j int) bool {
			a, b := rows[i], rows[j]
			return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
		})
		l.Syncs = append(l.Syncs, rows...)
	}
	if err := v.Render(out, l); err != nil {
		return err
	}
	if len(l.Unreachable) == len(results) {
		return fmt.Errorf("--all-contexts: no context of the kubeconfig could be listed")
	}
	return nil
}

// defaultContextTimeout bounds each context of --all-contexts.
const defaultContextTimeout = 5 * time.Second
