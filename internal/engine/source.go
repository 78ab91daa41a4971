package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/charts"
)

// SourceRequest builds the fetch request of s, reading its git Secret and
// the Secret of its trusted keys (spec.source.git.verify) with reader. The
// error names the Secret, never its content; FetchReason gives its Ready
// reason.
func SourceRequest(ctx context.Context, reader Reader, s *v1alpha1.Sync) (source.Request, error) {
	switch s.Spec.Source.Kind() {
	case v1alpha1.SourceOCI:
		return ociRequest(ctx, reader, s)
	default: // v1alpha1.SourceGit
		return gitRequest(ctx, reader, s)
	}
}

// gitRequest is SourceRequest of a Sync with spec.source.git.
func gitRequest(ctx context.Context, reader Reader, s *v1alpha1.Sync) (source.Request, error) {
	g := s.Spec.Source.Git
	req := source.Request{URL: g.URL, Ref: source.Ref{Branch: g.Branch, Tag: g.Tag, Commit: g.Commit}}
	if g.SecretRef != nil {
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: s.Namespace, Name: g.SecretRef.Name}
		if err := reader.Get(ctx, key, &secret); err != nil {
			return req, fmt.Errorf("read git Secret %s: %w", key, err)
		}
		req.Credentials = source.CredentialsFromSecret(secret.Data)
	}
	req.Credentials.InsecureSkipHostKeyCheck = g.InsecureSkipHostKeyCheck
	if g.Verify != nil {
		v, err := verification(ctx, reader, s.Namespace, g.Verify)
		if err != nil {
			return req, err
		}
		req.Verify = v
	}
	return req, nil
}

// verification reads the trusted keys of v. A missing Secret, or one
// without a usable key, is a *source.VerificationError: nothing is
// applied until it is fixed.
func verification(ctx context.Context, reader Reader, namespace string, v *v1alpha1.GitVerification) (*source.Verification, error) {
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: v.SecretRef.Name}
	if err := reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &source.VerificationError{Err: fmt.Errorf("trusted keys Secret %s of spec.source.git.verify not found: "+
				"create it with an allowed_signers entry (OpenSSH allowed signers) or *.asc entries (armored OpenPGP public keys)", key)}
		}
		return nil, fmt.Errorf("read trusted keys Secret %s: %w", key, err)
	}
	keys, err := source.ParseTrustedKeys(secret.Name, secret.Data)
	if err != nil {
		return nil, err
	}
	mode := source.VerifyHEAD
	if v.Mode == v1alpha1.VerifyTag {
		mode = source.VerifyTag
	}
	return &source.Verification{Mode: mode, Keys: keys}, nil
}

// FetchReason is the Ready reason of an error of SourceRequest or of the
// checkout: VerificationFailed when the revision or the trusted keys were
// refused, else FetchFailed.
func FetchReason(err error) string {
	var ve *source.VerificationError
	if errors.As(err, &ve) {
		return v1alpha1.ReasonVerificationFailed
	}
	return v1alpha1.ReasonFetchFailed
}

// Render checks out revision of the Sync's source into dir and renders
// its paths. On failure it also returns the Ready reason: FetchFailed,
// VerificationFailed (nothing of the revision was read) or BuildFailed.
func Render(ctx context.Context, s *v1alpha1.Sync, req source.Request, revision, dir string, opts RenderOptions) ([]render.Object, string, error) {
	if _, err := source.Checkout(ctx, req, revision, dir); err != nil {
		return nil, FetchReason(err), err
	}
	return RenderTree(ctx, s, dir, revision, opts)
}

// RenderTree renders the Sync's paths in dir, a checkout of revision (see
// source.Mirror). On failure it also returns the Ready reason: FetchFailed
// when a chart or its values could not be fetched, else BuildFailed.
func RenderTree(ctx context.Context, s *v1alpha1.Sync, dir, revision string, opts RenderOptions) ([]render.Object, string, error) {
	objects, err := render.Render(opts.forSync(ctx, s, dir, revision))
	switch {
	case errors.Is(err, render.ErrFetchFailed):
		// A chart or the values of a chart could not be fetched: the
		// files may be fine, and a retry may succeed.
		return nil, v1alpha1.ReasonFetchFailed, fmt.Errorf("revision %s: %w", source.Short(revision), err)
	case err != nil:
		return nil, v1alpha1.ReasonBuildFailed, fmt.Errorf("revision %s: %w", source.Short(revision), err)
	}
	return objects, "", nil
}

// RenderDir renders the Sync's paths in dir, a local checkout of its
// repository, as Render renders them from git, without a revision: the
// origins of the objects match those of a commit of the same files.
func RenderDir(ctx context.Context, s *v1alpha1.Sync, dir string, opts RenderOptions) ([]render.Object, error) {
	return render.Render(opts.forSync(ctx, s, dir, ""))
}

// RenderOptions are the render settings that are the agent's, not the
// Sync's.
type RenderOptions struct {
	// Scope tells render which kinds are namespaced. Required.
	Scope render.ScopeResolver
	// Budgets bound one render; the zero value is render.DefaultBudgets.
	Budgets render.Budgets
	// Variables are the Sync's variables (see Variables); nil substitutes
	// nothing.
	Variables map[string]render.Variable
	// KubeVersion and APIVersions are the cluster's, for the
	// .Capabilities of Helm charts (see Capabilities); empty, those of
	// the client-go driftless is built with.
	KubeVersion string
	APIVersions []string
	// Reader reads the ConfigMaps and Secrets of HelmCharts' valuesFrom
	// and chart secretRef in the Sync's namespace, and the objects of
	// their lookups (spec.lookup), as whoever the caller reads for the
	// Sync (see Reader); nil makes valuesFrom an error and lookup empty.
	Reader Reader
	// Charts fetches charts from chart repositories and OCI registries;
	// nil makes such a HelmChart an error. ChartCache, when Charts is nil,
	// fetches them with the credentials of the HelmChart's secretRef in
	// the Sync's namespace, read with Reader.
	Charts     render.ChartFetcher
	ChartCache *charts.Fetcher
	// SourceHosts, when it restricts, are the only hosts ChartCache may
	// fetch a chart from (repository, registry, download URL): the
	// agent's --tenant-source-hosts for a Sync outside its namespace.
	SourceHosts source.Hosts
	// ReadOutside, when set, is called when the render reads something
	// that is not in the checkout: a chart from a repository, or
	// valuesFrom. Such a render may change with no new commit, so it must
	// not be reused for the same revision.
	ReadOutside func()
	// Decrypt decrypts the files encrypted with SOPS (see
	// DecryptionKeys); nil decrypts nothing.
	Decrypt render.Decryptor
	// ReadsBeyondPaths: see render.Options.
	ReadsBeyondPaths func()
	// Cache keeps what the Sync's kustomizations built for its next
	// render; nil builds every kustomization every time.
	Cache *render.GeneratorCache
	// Remote fetches the remote bases of a Sync with
	// spec.kustomize.allowRemote; nil refuses them even then. A render
	// that fetched one reads outside the checkout (ReadOutside).
	Remote *RemoteBases
}

func (o RenderOptions) forSync(ctx context.Context, s *v1alpha1.Sync, dir, revision string) render.Options {
	outside := o.ReadOutside
	if outside == nil {
		outside = func() {}
	}
	var values render.ValuesReader
	if o.Reader != nil {
		read := valuesReader(ctx, o.Reader, s.Namespace)
		values = func(kind, name, key string) ([]byte, error) {
			outside()
			return read(kind, name, key)
		}
	}
	chartFetcher := o.Charts
	if chartFetcher == nil && o.ChartCache != nil {
		chartFetcher = repositoryCharts{ctx: ctx, reader: o.Reader, namespace: s.Namespace, fetcher: o.ChartCache, hosts: o.SourceHosts}
	}
	if chartFetcher != nil {
		chartFetcher = readOutside{chartFetcher, outside}
	}
	var lookupFunc render.LookupFunc
	if o.Reader != nil {
		read := lookup(ctx, o.Reader)
		lookupFunc = func(apiVersion, kind, namespace, name string) (map[string]any, error) {
			outside()
			return read(apiVersion, kind, namespace, name)
		}
	}
	var remote render.RemoteFetcher
	if o.Remote != nil {
		remote = o.Remote.Fetcher(ctx, outside)
	}
	return render.Options{
		Remote:           remote,
		Root:             dir,
		Paths:            s.Spec.Paths,
		Revision:         revision,
		SyncLabel:        s.LabelValue(),
		SyncShard:        v1alpha1.ShardOf(s.Labels),
		TargetNamespace:  s.Spec.TargetNamespace,
		Scope:            o.Scope,
		Budgets:          o.Budgets,
		Kustomize:        render.KustomizeOptions{AllowRemote: s.Spec.Kustomize != nil && s.Spec.Kustomize.AllowRemote},
		Variables:        o.Variables,
		KubeVersion:      o.KubeVersion,
		APIVersions:      o.APIVersions,
		ValuesFrom:       values,
		Charts:           chartFetcher,
		Lookup:           lookupFunc,
		Decrypt:          o.Decrypt,
		Cache:            o.Cache,
		ReadsBeyondPaths: o.ReadsBeyondPaths,
	}
}
