package engine

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/redact"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/charts"
)

// Identity is what the caller of Prepare reads and fetches for a Sync
// with: the agent, as the Sync (its ServiceAccount, its tenancy), or
// driftless diff and build, as the user.
type Identity struct {
	// Reader reads what the Sync names (its git Secret, variables, keys,
	// valuesFrom, chart credentials, lookups); required.
	Reader Reader
	// Options are the caller's render settings for the cluster the Sync
	// applies to: its Scope, Budgets and .Capabilities. Prepare fills in
	// the Sync's own (Variables, Decrypt, Reader, Charts, Remote).
	Options RenderOptions
	// DefaultKey is the agent's default key Secret
	// (--sops-age-key-secret), for a Sync in its namespace that names
	// none; the zero key for none.
	DefaultKey client.ObjectKey
	// Charts fetches charts from HTTP Helm repositories and OCI
	// registries into its cache directory; nil refuses such charts.
	Charts *charts.Fetcher
	// Mirror holds the remote Kustomize bases of a Sync with
	// spec.kustomize.allowRemote; nil refuses them even then.
	Mirror *source.Mirror
	// FileURLs lets a remote base be a file:// repository.
	FileURLs bool
	// SourceHosts, when it restricts, are the only hosts a chart, a
	// remote base or a key service may be reached on (the agent's
	// --tenant-source-hosts for a tenant's Sync).
	SourceHosts source.Hosts
}

// Prepared is the front half of a Sync's pipeline, assembled by Prepare:
// everything a render of one of its revisions needs besides the files.
type Prepared struct {
	// Request fetches the Sync's source, with its credentials and
	// trusted keys.
	Request source.Request
	// Variables are the Sync's variables; Keys its decryption keys.
	Variables map[string]render.Variable
	Keys      *secrets.Keys
	// Options render the Sync as the agent does: the caller's Options
	// with the Sync's variables, keys, chart fetcher and remote bases,
	// reading through Secrets.
	Options RenderOptions
	// Secrets remembers the values of the Secrets the render reads.
	Secrets *SecretRecorder
}

// Prepare assembles the front half of the pipeline of s as id reads and
// fetches: its source request, variables and decryption keys, and the
// render options that give the render its chart fetcher and remote
// bases. The agent, driftless diff --sync and driftless build --sync
// call it, so that what they render cannot differ. On failure it also
// returns the Ready reason; the error names what could not be read, never
// a value.
func Prepare(ctx context.Context, s *v1alpha1.Sync, id Identity) (*Prepared, string, error) {
	req, err := SourceRequest(ctx, id.Reader, s)
	if err != nil {
		return nil, FetchReason(err), err
	}
	return PrepareRender(ctx, s, req, id)
}

// PrepareRender is Prepare for a caller that has built the Sync's source
// request already (and resolved its revision with it).
func PrepareRender(ctx context.Context, s *v1alpha1.Sync, req source.Request, id Identity) (*Prepared, string, error) {
	vars, err := Variables(ctx, id.Reader, s)
	if err != nil {
		return nil, failure(err, ErrVariablesUnreadable), err
	}
	keys, err := DecryptionKeys(ctx, id.Reader, s, id.DefaultKey)
	keys.LimitAddresses(id.SourceHosts.CheckURL)
	if err != nil {
		return nil, failure(err, ErrKeysUnreadable), err
	}
	p := &Prepared{Request: req, Variables: vars, Keys: keys, Options: id.Options, Secrets: &SecretRecorder{Reader: id.Reader}}
	p.Options.Variables = vars
	p.Options.Decrypt = Decryptor(keys)
	p.Options.Reader = p.Secrets
	p.Options.ChartCache = id.Charts
	p.Options.SourceHosts = id.SourceHosts
	if s.Spec.Kustomize != nil && s.Spec.Kustomize.AllowRemote && id.Mirror != nil {
		p.Options.Remote = &RemoteBases{Mirror: id.Mirror, Source: req, FileURLs: id.FileURLs, Hosts: id.SourceHosts}
	}
	return p, "", nil
}

// failure is the Ready reason of an error reading variables or keys:
// FetchFailed (retried soon) when it wraps unreadable, an error of the
// API server; else BuildFailed (a missing object, a bad key).
func failure(err, unreadable error) string {
	if errors.Is(err, unreadable) {
		return v1alpha1.ReasonFetchFailed
	}
	return v1alpha1.ReasonBuildFailed
}

// Mask masks in err the values of the Sync's Secret variables and of the
// Secrets its render read (a chart's fail may quote a valuesFrom value),
// as the agent masks a sync's errors.
func (p *Prepared) Mask(err error) error {
	if err == nil {
		return nil
	}
	return redact.New(p.Secrets.Values()...).Error(VariablesRedactor(p.Variables).Error(err))
}
