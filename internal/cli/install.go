package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/source"
)

// Names the install manifests (config/) give the agent's objects.
const (
	installNamespace  = "driftless-system"
	installDeployment = "driftless"
	deployKeySecret   = "driftless-git-deploy"
	installManager    = "driftless-install"
	// maxInstallShards bounds install --shards.
	maxInstallShards = 64
)

// installOptions are the flags of `driftless install`.
type installOptions struct {
	cluster      clusterFlags
	namespace    string
	gitURL       string
	gitBranch    string
	gitPaths     []string
	syncInterval time.Duration
	image        string
	knownHosts   string
	export       bool
	wait         bool
	timeout      time.Duration
	// shards, when above 0, adds that many Deployments, each serving the
	// Syncs of one shard; the agent's Deployment then serves the Syncs
	// without a shard label.
	shards int
}

func newInstallCommand() *cobra.Command {
	o := &installOptions{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the agent in a cluster, syncing one git repository",
		Long: `Install driftless in the cluster of the kubeconfig: the Sync CRD and its
admission policy, the agent's namespace, service account and RBAC (the
manifests of config/, as "kubectl apply -k config/default" applies them),
and the agent's Deployment running

  driftless agent --git-url=… --git-branch=… --git-path=… --sync-interval=… \
    --git-secret=driftless-git-deploy --sync-service-account=driftless-root

(the root Sync acts as the ServiceAccount driftless-root, bound to
cluster-admin; the agent itself may write nothing but its own status).

For an SSH repository it also makes an ed25519 deploy key and a Secret
driftless-git-deploy holding it and the git host's known_hosts: fetched from
the host (its fingerprint is printed: compare it with the one your git host
publishes) or read from --known-hosts. It then waits until the agent's
Deployment is available and prints the public key to add to the repository
as a read-only deploy key ("driftless identity" prints it again).

Installing again upgrades in place: the objects are applied again with the
new flags, and an existing deploy key is kept.

--export prints the manifests as YAML instead of applying them, for keeping
the installation in git. The deploy key Secret is never exported: install
once without --export to create it, or create it with kubectl.`,
		Example: `  driftless install --git-url=ssh://git@github.com/org/fleet.git \
    --git-branch=main --git-path=clusters/prod,apps --sync-interval=1m

  # the agent and three shards: label a Sync driftless.dev/shard=shard-2 to move it
  driftless install --git-url=ssh://git@github.com/org/fleet.git --shards=3

  # the same manifests, for a repository of their own
  driftless install --git-url=ssh://git@github.com/org/fleet.git --export > driftless.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInstall(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.namespace, "namespace", installNamespace, "the agent's namespace")
	f.StringVar(&o.gitURL, "git-url", "", "repository to sync (ssh://, scp-like git@host:path, or https://); required")
	f.StringVar(&o.gitBranch, "git-branch", "master", "branch to sync")
	f.StringSliceVar(&o.gitPaths, "git-path", nil, "comma-separated paths in the repository to apply (default: the whole repository)")
	f.DurationVar(&o.syncInterval, "sync-interval", 5*time.Minute, "how often the agent syncs")
	f.StringVar(&o.image, "image", "", "the agent's container image (default: the one in config/manager/deployment.yaml)")
	f.StringVar(&o.knownHosts, "known-hosts", "", "known_hosts file with the git host's key, instead of fetching it from the host")
	f.BoolVar(&o.export, "export", false, "print the manifests as YAML instead of applying them (without the deploy key Secret)")
	f.BoolVar(&o.wait, "wait", true, "wait until the agent's Deployment is available")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the agent's Deployment")
	f.IntVar(&o.shards, "shards", 0, "also run N shard Deployments, driftless-shard-1 to driftless-shard-N, each serving the Syncs labelled driftless.dev/shard=shard-1 … shard-N (agent --shard); the agent's Deployment driftless then serves the Syncs without that label, the root Sync among them (docs/sharding.md); 0: one agent serves every Sync")
	o.cluster.add(cmd)
	return cmd
}

// installObjects are the manifests of the installation, in apply order:
// CRD and policies, RBAC, then namespace, Deployment and Service.
func installObjects(o *installOptions) ([]*unstructured.Unstructured, error) {
	def, err := crd.SyncCRD()
	if err != nil {
		return nil, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(def)
	if err != nil {
		return nil, err
	}
	crdObj := &unstructured.Unstructured{Object: u}
	crdObj.SetAPIVersion("apiextensions.k8s.io/v1")
	crdObj.SetKind("CustomResourceDefinition")
	unstructured.RemoveNestedField(crdObj.Object, "status")
	unstructured.RemoveNestedField(crdObj.Object, "metadata", "creationTimestamp")
	objs := []*unstructured.Unstructured{crdObj}
	policies, err := crd.SyncPolicies()
	if err != nil {
		return nil, err
	}
	objs = append(objs, policies...)
	// The namespace first of the manager's manifests: RBAC needs it.
	manager, err := config.Manifests("manager")
	if err != nil {
		return nil, err
	}
	rbac, err := config.Manifests("rbac")
	if err != nil {
		return nil, err
	}
	var rest []*unstructured.Unstructured
	for _, m := range manager {
		if m.GetKind() == "Namespace" {
			objs = append(objs, m)
		} else {
			rest = append(rest, m)
		}
	}
	objs = append(objs, rbac...)
	objs = append(objs, rest...)
	var shards []*unstructured.Unstructured
	for _, obj := range objs {
		inNamespace(obj, o.namespace)
		if obj.GetKind() == "Deployment" && obj.GetName() == installDeployment {
			if err := configureAgent(obj, o); err != nil {
				return nil, err
			}
			for i := 1; i <= o.shards; i++ {
				shards = append(shards, shardDeployment(obj, i))
			}
		}
	}
	return append(objs, shards...), nil
}

// Labels of the shard Deployments (install --shards) and their pods.
const (
	shardComponentLabel = "app.kubernetes.io/component"
	shardComponent      = "shard"
	shardPodName        = "driftless-shard"
)

// shardName is the name of the i-th shard of install --shards.
func shardName(i int) string { return fmt.Sprintf("shard-%d", i) }

// shardDeployment is the Deployment of the i-th shard: a copy of the
// agent's, named driftless-shard-<i>, running agent --shard=shard-<i>
// with the agent's flags but those of the root Sync, whose pods the
// agent's Deployment and Services do not select.
func shardDeployment(agent *unstructured.Unstructured, i int) *unstructured.Unstructured {
	d := agent.DeepCopy()
	name := installDeployment + "-" + shardName(i)
	d.SetName(name)
	d.SetLabels(map[string]string{"app.kubernetes.io/name": shardPodName, shardComponentLabel: shardComponent, v1alpha1.ShardLabel: shardName(i)})
	pods := map[string]any{"app.kubernetes.io/name": shardPodName, "app.kubernetes.io/instance": name}
	_ = unstructured.SetNestedMap(d.Object, pods, "spec", "selector", "matchLabels")
	_ = unstructured.SetNestedMap(d.Object, pods, "spec", "template", "metadata", "labels")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		m, ok := c.(map[string]any)
		if !ok || m["name"] != "agent" {
			continue
		}
		args, _, _ := unstructured.NestedStringSlice(m, "args")
		shardArgs := append([]string{"agent", "--shard=" + shardName(i)},
			manifestFlagsBut(args, "git-url", "git-branch", "git-path", "sync-interval", "git-secret", "sync-service-account", "sync-wait", "shard")...)
		_ = unstructured.SetNestedStringSlice(m, shardArgs, "args")
	}
	_ = unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers")
	return d
}

// inNamespace moves an object of the manifests from driftless-system to ns.
func inNamespace(obj *unstructured.Unstructured, ns string) {
	if ns == installNamespace {
		return
	}
	switch {
	case obj.GetKind() == "Namespace" && obj.GetName() == installNamespace:
		obj.SetName(ns)
	case obj.GetNamespace() == installNamespace:
		obj.SetNamespace(ns)
	}
	if subjects, ok, _ := unstructured.NestedSlice(obj.Object, "subjects"); ok {
		for _, s := range subjects {
			if m, ok := s.(map[string]any); ok && m["namespace"] == installNamespace {
				m["namespace"] = ns
			}
		}
		_ = unstructured.SetNestedSlice(obj.Object, subjects, "subjects")
	}
}

// configureAgent sets the agent container's image and flags.
func configureAgent(obj *unstructured.Unstructured, o *installOptions) error {
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
		return fmt.Errorf("config/manager/deployment.yaml: %w", err)
	}
	args := []string{"agent", "--git-url=" + o.gitURL, "--git-branch=" + o.gitBranch}
	if len(o.gitPaths) > 0 {
		args = append(args, "--git-path="+strings.Join(o.gitPaths, ","))
	}
	args = append(args, "--sync-interval="+o.syncInterval.String())
	if isSSH(o.gitURL) {
		args = append(args, "--git-secret="+deployKeySecret)
	}
	if o.shards > 0 {
		// The shards serve the labelled Syncs; this agent the others.
		args = append(args, "--shard=")
	}
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		if c.Name != "agent" {
			continue
		}
		// The manifest's other flags stay, such as
		// --sync-service-account=driftless-root: without it the root Sync
		// would act as the agent itself, which may write nothing.
		c.Args = append(args, manifestFlagsBut(c.Args, "git-url", "git-branch", "git-path", "sync-interval", "git-secret", "shard")...)
		if o.image != "" {
			c.Image = o.image
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u, "status")
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
		obj.Object = u
		return nil
	}
	return errors.New("config/manager/deployment.yaml has no container named agent")
}

// manifestFlagsBut returns the --flag=value arguments of args whose flag
// is none of names.
func manifestFlagsBut(args []string, names ...string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if strings.HasPrefix(a, "--") && !slices.Contains(names, name) {
			out = append(out, a)
		}
	}
	return out
}

func isSSH(gitURL string) bool {
	p, err := source.Protocol(gitURL)
	return err == nil && p == source.ProtocolSSH
}

func runInstall(ctx context.Context, o *installOptions, out, errOut io.Writer) error {
	if o.gitURL == "" {
		return &exitError{code: 2, err: errors.New("--git-url is required: the repository the agent syncs, such as ssh://git@github.com/org/fleet.git")}
	}
	if o.shards < 0 || o.shards > maxInstallShards {
		return &exitError{code: 2, err: fmt.Errorf("--shards %d: give 0 (one agent for every Sync) up to %d", o.shards, maxInstallShards)}
	}
	if _, err := source.Protocol(o.gitURL); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--git-url %s: %w", source.Redact(o.gitURL), err)}
	}
	objs, err := installObjects(o)
	if err != nil {
		return err
	}
	if o.export {
		return exportYAML(out, objs)
	}
	cl, err := o.cluster.connect()
	if err != nil {
		return err
	}
	var public string
	if isSSH(o.gitURL) {
		secret, pub, err := deployKey(ctx, cl.client, o, errOut)
		if err != nil {
			return err
		}
		public = pub
		objs = append(objs, secret)
	}
	for _, obj := range objs {
		if err := cl.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(installManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("install %s %s in the cluster at %s: %w", obj.GetKind(), objectName(obj), cl.host, err)
		}
	}
	fmt.Fprintf(errOut, "applied %d objects to the cluster at %s\n", len(objs), cl.host)
	if o.wait {
		for i := 0; i <= o.shards; i++ {
			name := installDeployment
			if i > 0 {
				name += "-" + shardName(i)
			}
			if err := waitAvailable(ctx, cl.client, client.ObjectKey{Namespace: o.namespace, Name: name}, o.timeout, errOut); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "driftless is installed in namespace %s, syncing %s (%s).\n", o.namespace, source.Redact(o.gitURL), o.gitBranch)
	if public != "" {
		fmt.Fprintf(out, "Add this public key to the repository as a read-only deploy key:\n\n%s\n", public)
	}
	return nil
}

func objectName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() != "" {
		return obj.GetNamespace() + "/" + obj.GetName()
	}
	return obj.GetName()
}

// deployKey returns the deploy key Secret to apply and its public key:
// the cluster's when it has one (an upgrade keeps it), else a new key,
// with known_hosts from --known-hosts or fetched from the git host.
func deployKey(ctx context.Context, c client.Client, o *installOptions, errOut io.Writer) (*unstructured.Unstructured, string, error) {
	comment := "driftless@" + o.namespace
	var existing corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: deployKeySecret}, &existing)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("read the deploy key Secret %s/%s: %w", o.namespace, deployKeySecret, err)
	}
	identity, knownHosts := existing.Data["identity"], existing.Data["known_hosts"]
	public := ""
	if len(identity) > 0 {
		if public, err = publicKeyOf(identity, comment); err != nil {
			return nil, "", fmt.Errorf("the deploy key Secret %s/%s: %w; delete it to make a new key", o.namespace, deployKeySecret, err)
		}
		fmt.Fprintf(errOut, "keeping the deploy key of Secret %s/%s\n", o.namespace, deployKeySecret)
	} else if identity, public, err = newDeployKey(comment); err != nil {
		return nil, "", err
	}
	switch {
	case o.knownHosts != "":
		if knownHosts, err = os.ReadFile(o.knownHosts); err != nil {
			return nil, "", fmt.Errorf("--known-hosts: %w", err)
		}
		fps := knownHostsFingerprints(knownHosts)
		if len(fps) == 0 {
			return nil, "", fmt.Errorf("--known-hosts %s holds no known_hosts line", o.knownHosts)
		}
		fmt.Fprintf(errOut, "trusting the host keys of %s: %s\n", o.knownHosts, strings.Join(fps, ", "))
	case len(knownHosts) == 0:
		addr, err := sshAddress(o.gitURL)
		if err != nil {
			return nil, "", err
		}
		line, fp, err := fetchHostKey(addr, 10*time.Second)
		if err != nil {
			return nil, "", err
		}
		knownHosts = []byte(line + "\n")
		fmt.Fprintf(errOut, "fetched the SSH host key of %s: %s — compare it with the fingerprint your git host publishes\n", addr, fp)
	}
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: deployKeySecret, Namespace: o.namespace, Labels: map[string]string{"app.kubernetes.io/name": "driftless"}},
		Data:       map[string][]byte{"identity": identity, "known_hosts": knownHosts},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, "", err
	}
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: u}, public, nil
}

// waitAvailable waits until the Deployment has rolled out and is
// available, printing a progress line while it waits.
func waitAvailable(ctx context.Context, c client.Client, key client.ObjectKey, timeout time.Duration, errOut io.Writer) error {
	fmt.Fprintf(errOut, "waiting up to %s for Deployment %s to be available…\n", timeout, key)
	last := "not found"
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := c.Get(ctx, key, &d); err != nil {
			last = err.Error()
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		last = fmt.Sprintf("%d of %d replicas updated and available", min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas), want)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas >= want, nil
	})
	if err != nil {
		return fmt.Errorf("the agent's Deployment %s is not available after %s (%s): see `kubectl -n %s describe deployment %s` and its pods' logs", key, timeout, last, key.Namespace, key.Name)
	}
	fmt.Fprintf(errOut, "Deployment %s is available\n", key)
	return nil
}

// exportYAML prints objects as one YAML stream.
func exportYAML(out io.Writer, objs []*unstructured.Unstructured) error {
	var b bytes.Buffer
	b.WriteString("# driftless install --export: apply with `kubectl apply --server-side --force-conflicts -f`\n")
	b.WriteString("# (the agent re-applies its CRD at start, so it shares fields with you).\n")
	b.WriteString("# The deploy key Secret " + deployKeySecret + " is not included: create it\n")
	b.WriteString("# with `driftless install` or `kubectl create secret generic` (keys identity, known_hosts).\n")
	for _, obj := range objs {
		y, err := sigsyaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	_, err := out.Write(b.Bytes())
	return err
}

// identityOptions are the flags of `driftless identity`.
type identityOptions struct {
	cluster   clusterFlags
	namespace string
}

func newIdentityCommand() *cobra.Command {
	o := &identityOptions{}
	cmd := &cobra.Command{
		Use:   "identity",
		Short: "Print the public key of the agent's deploy key",
		Long: `Print the public key of the deploy key "driftless install" made (the Secret
driftless-git-deploy in the agent's namespace), to add to the repository as a
read-only deploy key.`,
		Example: `  driftless identity`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.cluster.connect()
			if err != nil {
				return err
			}
			var s corev1.Secret
			key := client.ObjectKey{Namespace: o.namespace, Name: deployKeySecret}
			if err := cl.client.Get(cmd.Context(), key, &s); err != nil {
				if apierrors.IsNotFound(err) {
					return &exitError{code: 2, err: fmt.Errorf("no deploy key Secret %s in the cluster at %s: run `driftless install`, or pass --namespace", key, cl.host)}
				}
				return fmt.Errorf("read the deploy key Secret %s in the cluster at %s: %w", key, cl.host, err)
			}
			public, err := publicKeyOf(s.Data["identity"], "driftless@"+o.namespace)
			if err != nil {
				return fmt.Errorf("the deploy key Secret %s: %w", key, err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), public)
			return err
		},
	}
	cmd.Flags().StringVar(&o.namespace, "namespace", installNamespace, "the agent's namespace")
	o.cluster.add(cmd)
	return cmd
}
