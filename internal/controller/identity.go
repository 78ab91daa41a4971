package controller

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/source"
)

// Tenancy fences the Syncs outside the agent's own namespace (tenant
// Syncs): who they act as and what they may name.
type Tenancy struct {
	// AgentNamespace is the agent's namespace. Its Syncs are the
	// administrator's: they act as the agent unless they name a
	// ServiceAccount, and may use file:// sources.
	AgentNamespace string
	// DefaultServiceAccount is the ServiceAccount (of the Sync's own
	// namespace) a tenant Sync that names none impersonates. Empty
	// refuses such Syncs (ServiceAccountRequired).
	DefaultServiceAccount string
	// CrossNamespaceRefs lets tenant Syncs name objects of other
	// namespaces (dependsOn); off, such a Sync is InvalidSpec.
	CrossNamespaceRefs bool
	// FileURLs lets tenant Syncs use file:// sources, which read the
	// agent's filesystem; off, such a Sync is InvalidSpec.
	FileURLs bool
	// SourceHosts, when it restricts, are the only hosts tenant Syncs may
	// fetch from: their git repository (else InvalidSpec), their charts'
	// repositories, registries and download URLs, and their remote
	// Kustomize bases (else the render fails, naming the host).
	SourceHosts source.Hosts
}

// DefaultTenancy is the agent's default: tenants must act as a
// ServiceAccount, stay in their namespace and fetch over the network.
func DefaultTenancy(agentNamespace string) Tenancy {
	return Tenancy{AgentNamespace: agentNamespace}
}

// tenant reports whether s is outside the agent's namespace.
func (t Tenancy) tenant(s *v1alpha1.Sync) bool { return s.Namespace != t.AgentNamespace }

// errServiceAccountRequired: a tenant Sync has no identity to act as.
var errServiceAccountRequired = errors.New("no ServiceAccount to act as")

// serviceAccountOf returns the ServiceAccount of s's namespace that s's
// requests impersonate, or "" for the agent's own identity.
func (t Tenancy) serviceAccountOf(s *v1alpha1.Sync) (string, error) {
	switch {
	case s.Spec.ServiceAccountName != "":
		return s.Spec.ServiceAccountName, nil
	case !t.tenant(s):
		return "", nil
	case t.DefaultServiceAccount != "":
		return t.DefaultServiceAccount, nil
	}
	return "", fmt.Errorf("%w: the Sync is outside the agent's namespace %s, so it may only act as a ServiceAccount of its own namespace %s: "+
		"set spec.serviceAccountName to a ServiceAccount bound to the Roles the Sync's objects need (docs/security.md), "+
		"or run the agent with --default-service-account", errServiceAccountRequired, t.AgentNamespace, s.Namespace)
}

// Identities hands out the client a Sync's requests for its objects go
// through: the agent's own, or one impersonating the Sync's
// ServiceAccount. Impersonating clients are built once per account and
// reused; they share the agent's transport settings, RESTMapper and
// scheme. The manager's cache and watches are not affected: they stay
// the agent's.
type Identities struct {
	// Tenancy fences the Syncs outside the agent's namespace.
	Tenancy Tenancy

	agent   client.Client
	config  *rest.Config
	options client.Options
	// cluster is the server of a remote cluster (spec.kubeConfig) whose
	// identities these are, for messages; "" for the agent's cluster.
	cluster string

	mu      sync.Mutex
	clients map[string]client.Client
}

// NewIdentities returns Identities that fence Syncs as t says, act as
// agent, and impersonate with config (the agent's) and options (scheme
// and mapper).
func NewIdentities(t Tenancy, agent client.Client, config *rest.Config, options client.Options) *Identities {
	options.HTTPClient = nil // one per identity: impersonation is a transport wrapper
	return &Identities{Tenancy: t, agent: agent, config: config, options: options, clients: map[string]client.Client{}}
}

// tenancy returns the fences, or nil when i is nil (unfenced).
func (i *Identities) tenancy() *Tenancy {
	if i == nil {
		return nil
	}
	return &i.Tenancy
}

// identityOf returns who a Sync acts as for its objects: with no
// Identities, the agent through applier.
func identityOf(i *Identities, applier client.Client, s *v1alpha1.Sync) (identity, error) {
	if i == nil {
		return identity{name: "the agent", client: forbiddenNamed{Client: applier, who: "the agent"}}, nil
	}
	sa, err := i.Tenancy.serviceAccountOf(s)
	if err != nil {
		return identity{}, err
	}
	return i.For(s, sa)
}

func (r *SyncReconciler) identityOf(s *v1alpha1.Sync) (identity, error) {
	return identityOf(r.Identities, r.Applier, s)
}

// readerOf returns what reads the Secrets and ConfigMaps s names (see
// engine.Reader): for a Sync outside the agent's namespace, id, the
// Sync's ServiceAccount, so that creating a Sync or pushing to its
// repository reads nothing that account may not get; for the agent's
// namespace, or without tenancy, agent, the agent's own uncached reader.
func readerOf(i *Identities, agent client.Reader, s *v1alpha1.Sync, id identity) engine.Reader {
	if i == nil || !i.Tenancy.tenant(s) {
		return agent
	}
	return readsAs{id.client}
}

// ReaderOf returns what reads the Secrets s names (see readerOf): as
// s's ServiceAccount outside the agent's namespace. An error when the
// tenancy fences refuse s's spec (a host --tenant-source-hosts does not
// allow, a file:// URL: nothing of its source may be fetched) or s has
// no identity to act as (ServiceAccountRequired).
func (r *SyncReconciler) ReaderOf(s *v1alpha1.Sync) (engine.Reader, error) {
	if err := checkSpec(s, r.Identities.tenancy()); err != nil {
		return nil, err
	}
	id, err := r.identityOf(s)
	if err != nil {
		return nil, err
	}
	return readerOf(r.Identities, r.Reader, s, id), nil
}

// readsAs reads as a tenant Sync's identity, and marks its refusals as
// reads (ForbiddenError.Read), which stall the Sync with AccessDenied.
type readsAs struct{ reader client.Reader }

func (r readsAs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.reader.Get(ctx, key, obj, opts...)
	if fe := (*ForbiddenError)(nil); errors.As(err, &fe) {
		fe.Read = true
	}
	return err
}

// deniedRead reports whether err holds a read the Sync's ServiceAccount
// may not make (readsAs).
func deniedRead(err error) bool {
	fe := (*ForbiddenError)(nil)
	return errors.As(err, &fe) && fe.Read
}

// gitFences returns what a tenant git Sync's source names that it may
// not: a file:// source (the agent's filesystem, other Syncs' checkouts)
// or a host --tenant-source-hosts does not list.
func (t Tenancy) gitFences(s *v1alpha1.Sync, protocol string) []error {
	var errs []error
	if protocol == source.ProtocolFile && !t.FileURLs {
		errs = append(errs, fmt.Errorf("spec.source.git.url %q is a local path, which only Syncs in the agent's namespace %s may use: "+
			"serve the repository over ssh:// or https://, or run the agent with --allow-file-urls", source.Redact(s.Spec.Source.Git.URL), t.AgentNamespace))
	}
	if protocol != source.ProtocolFile {
		if err := t.SourceHosts.CheckHost(fmt.Sprintf("spec.source.git.url %q", source.Redact(s.Spec.Source.Git.URL)), s.Spec.Source.Git.URL); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// refFences returns what a tenant Sync of any source kind names beyond
// its source that it may not: with CrossNamespaceRefs off, Syncs of
// other namespaces.
func (t Tenancy) refFences(s *v1alpha1.Sync) []error {
	var errs []error
	if !t.CrossNamespaceRefs {
		for i, d := range s.Spec.DependsOn {
			if d.Namespace != "" && d.Namespace != s.Namespace {
				errs = append(errs, fmt.Errorf("spec.dependsOn[%d].namespace %q is another namespace, which a Sync outside the agent's namespace %s may not name: "+
					"depend on Syncs of %s only, or run the agent with --no-cross-namespace-refs=false", i, d.Namespace, t.AgentNamespace, s.Namespace))
			}
		}
	}
	return errs
}

// identity is who a Sync acts as, and the client that acts so.
type identity struct {
	// name is "serviceaccount <namespace>:<name>" or "the agent", for
	// messages.
	name   string
	client client.Client
}

// For returns the identity of s's requests: the agent's own when
// serviceAccount is "", else serviceAccount of s's namespace.
func (i *Identities) For(s *v1alpha1.Sync, serviceAccount string) (identity, error) {
	if serviceAccount == "" {
		name := "the agent"
		if i.cluster != "" {
			name = "the kubeconfig's user in cluster " + i.cluster
		}
		return identity{name: name, client: forbiddenNamed{Client: i.agent, who: name}}, nil
	}
	user := "system:serviceaccount:" + s.Namespace + ":" + serviceAccount
	name := "serviceaccount " + s.Namespace + ":" + serviceAccount
	if i.cluster != "" {
		name += " in cluster " + i.cluster
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.clients[user]; ok {
		return identity{name: name, client: c}, nil
	}
	cfg := rest.CopyConfig(i.config)
	// The extra tells the admission webhook the write is the agent's, not
	// a person's holding the ServiceAccount's token.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: map[string][]string{v1alpha1.AgentExtraKey: {v1alpha1.AgentExtraValue}}}
	c, err := client.New(cfg, i.options)
	if err != nil {
		return identity{}, fmt.Errorf("build a client impersonating %s: %w", name, err)
	}
	named := forbiddenNamed{Client: c, who: name}
	i.clients[user] = named
	return identity{name: name, client: named}, nil
}

// forbiddenNamed says, when the API server refuses a request (403), who
// was refused what, on which object, and what to do.
type forbiddenNamed struct {
	client.Client
	who string
}

func (f forbiddenNamed) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := f.Client.Get(ctx, key, obj, opts...)
	if apierrors.IsForbidden(err) {
		obj.SetNamespace(key.Namespace)
		obj.SetName(key.Name)
	}
	return f.named("get", obj, err)
}

func (f forbiddenNamed) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return f.named("create", obj, f.Client.Create(ctx, obj, opts...))
}

func (f forbiddenNamed) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return f.named("update", obj, f.Client.Update(ctx, obj, opts...))
}

func (f forbiddenNamed) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return f.named("patch", obj, f.Client.Patch(ctx, obj, patch, opts...))
}

func (f forbiddenNamed) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return f.named("delete", obj, f.Client.Delete(ctx, obj, opts...))
}

func (f forbiddenNamed) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return f.named("patch", nil, f.Client.Apply(ctx, obj, opts...))
}

// deniedVerb finds the verb in the API server's RBAC message: `User "…"
// cannot patch resource "configmaps" …`.
var deniedVerb = regexp.MustCompile(`cannot (\S+) resource`)

// named rewrites a 403 into a ForbiddenError; other errors pass as they
// are.
func (f forbiddenNamed) named(verb string, obj client.Object, err error) error {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return err
	}
	fe := &ForbiddenError{Who: f.who, Verb: verb, err: err}
	st := status.Status()
	if m := deniedVerb.FindStringSubmatch(st.Message); m != nil {
		fe.Verb = m[1]
	}
	if d := st.Details; d != nil {
		fe.Resource, fe.Name = d.Kind, d.Name
		if d.Group != "" {
			fe.Resource += "." + d.Group
		}
	}
	if obj != nil {
		fe.Namespace = obj.GetNamespace()
		if fe.Name == "" {
			fe.Name = obj.GetName()
		}
	} else if m := deniedNamespace.FindStringSubmatch(st.Message); m != nil {
		fe.Namespace = m[1]
	}
	return fe
}

// deniedNamespace finds the namespace in the API server's RBAC message.
var deniedNamespace = regexp.MustCompile(`in the namespace "([^"]+)"`)

// ForbiddenError is a request the API server refused to the identity a
// Sync acts as. It unwraps to the API server's error.
type ForbiddenError struct {
	// Who is "serviceaccount <namespace>:<name>" or "the agent".
	Who string
	// Verb, Resource (plural, with its group), Namespace and Name say
	// what was refused.
	Verb, Resource, Namespace, Name string
	// Read: the request read a Secret or ConfigMap the Sync names (its
	// git Secret, variables, keys, values), not an object of the Sync.
	Read bool
	err  error
}

func (e *ForbiddenError) Error() string {
	where := "(cluster-scoped)"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	fix := "grant it in a Role/ClusterRole, or move the object to a Sync that may"
	switch {
	case e.Read:
		fix = fmt.Sprintf("a Sync outside the agent's namespace reads what it names as its ServiceAccount; "+
			"grant it %s on %s %q in a Role of namespace %s bound to it (docs/security.md)", e.Verb, e.Resource, e.Name, e.Namespace)
	case e.Who == "the agent":
		fix = "grant the agent's ServiceAccount that right, or set spec.serviceAccountName to a ServiceAccount that has it"
	}
	return fmt.Sprintf("%s may not %s %s %q %s: %s", e.Who, e.Verb, e.Resource, e.Name, where, fix)
}

func (e *ForbiddenError) Unwrap() error { return e.err }

// sourceHosts returns the hosts s may fetch charts and remote bases from:
// every host, unless s is a tenant's and --tenant-source-hosts restricts.
func (r *SyncReconciler) sourceHosts(s *v1alpha1.Sync) source.Hosts {
	if r.Identities == nil || !r.Identities.Tenancy.tenant(s) {
		return source.Hosts{}
	}
	return r.Identities.Tenancy.SourceHosts
}

// renderIdentity is what the agent reads and fetches for s with (see
// engine.Prepare): reader, the render options of tgt's cluster, the
// agent's default key, chart cache and mirror, and the hosts and file://
// repositories s may reach — its keys send requests only to the key
// services on hosts s may fetch from, so a tenant's key material names
// no address of the agent's.
func (r *SyncReconciler) renderIdentity(s *v1alpha1.Sync, reader engine.Reader, tgt target) engine.Identity {
	return engine.Identity{
		Reader:      reader,
		Options:     r.renderScope(tgt),
		DefaultKey:  r.DefaultAgeKey,
		Charts:      r.RenderOptions.ChartCache,
		Mirror:      r.Mirror(),
		FileURLs:    r.mayReadFiles(s),
		SourceHosts: r.sourceHosts(s),
	}
}

// renderDigest tells apart the renders of p for different variables,
// keys and clusters in the render cache.
func renderDigest(p *engine.Prepared, tgt target) string {
	return engine.VariablesDigest(p.Variables) + p.Keys.Digest() + tgt.digest()
}

// mayReadFiles reports whether s may read file:// repositories, as its
// source or as a remote Kustomize base: without tenancy every Sync may;
// with it, the agent's namespace, or every Sync with FileURLs.
func (r *SyncReconciler) mayReadFiles(s *v1alpha1.Sync) bool {
	if r.Identities == nil {
		return true
	}
	t := r.Identities.Tenancy
	return t.FileURLs || s.Namespace == t.AgentNamespace
}
