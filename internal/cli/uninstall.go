package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/admission"
)

// uninstallOptions are the flags of `driftless uninstall`.
type uninstallOptions struct {
	cluster   clusterFlags
	namespace string
	crds      bool
	yes       bool
	timeout   time.Duration
}

func newUninstallCommand() *cobra.Command {
	o := &uninstallOptions{}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the agent from the cluster; managed objects stay",
		Long: `Remove what "driftless install" put in the cluster: the agent's Deployment
and the shard Deployments of install --shards (waiting until their pods are
gone), its Service, service account, RBAC, deploy key Secret, admission
webhook and its certificate, and the ConfigMaps the agent keeps its own state
in (notifications sent, push notices passed between shards). The namespace,
the Syncs and every object they manage stay as they are.

With --crds it also removes the Sync CRD and its admission policy, which
deletes every Sync of the cluster: their finalizers are removed first, so
their objects are orphaned (left in place), never deleted. It asks for
confirmation unless --yes is given.`,
		Example: `  driftless uninstall
  driftless uninstall --crds --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUninstall(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.namespace, "namespace", installNamespace, "the agent's namespace")
	f.BoolVar(&o.crds, "crds", false, "also remove the Sync CRD and every Sync (their objects stay)")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation of --crds")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the agent's pods to be gone")
	o.cluster.add(cmd)
	return cmd
}

func runUninstall(ctx context.Context, o *uninstallOptions, in io.Reader, out, errOut io.Writer) error {
	install := &installOptions{namespace: o.namespace, gitURL: "-", syncInterval: time.Minute}
	objs, err := installObjects(install)
	if err != nil {
		return err
	}
	cl, err := o.cluster.connect()
	if err != nil {
		return err
	}
	c := cl.client
	var syncs v1alpha1.SyncList
	if o.crds {
		if err := c.List(ctx, &syncs); err != nil && !meta.IsNoMatchError(err) {
			return fmt.Errorf("list the Syncs of the cluster at %s: %w", cl.host, err)
		}
		if !o.yes {
			fmt.Fprintf(errOut, "Remove the Sync CRD and the %d Syncs of the cluster at %s (their objects stay)? [y/N] ", len(syncs.Items), cl.host)
			answer, _ := bufio.NewReader(in).ReadString('\n')
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				return &exitError{code: 2, err: errors.New("not confirmed: nothing removed; pass --yes to confirm --crds without a question")}
			}
		}
	}

	// The agent first, so that it acts on nothing that follows.
	remove := func(obj client.Object) error {
		if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("remove %s %s from the cluster at %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), cl.host, err)
		}
		return nil
	}
	var rest []*unstructured.Unstructured
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "Deployment":
			if err := remove(obj); err != nil {
				return err
			}
		case obj.GetKind() == "Namespace", obj.GetKind() == "CustomResourceDefinition", strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy"):
		default:
			rest = append(rest, obj)
		}
	}
	// The shard Deployments of install --shards.
	if err := c.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(o.namespace), client.MatchingLabels{shardComponentLabel: shardComponent},
		client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the shard Deployments from the cluster at %s: %w", cl.host, err)
	}
	fmt.Fprintf(errOut, "waiting up to %s for the agent's pods in %s to be gone…\n", o.timeout, o.namespace)
	err = wait.PollUntilContextTimeout(ctx, time.Second, o.timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"driftless", shardPodName} {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(o.namespace), client.MatchingLabels{"app.kubernetes.io/name": name}); err != nil || len(pods.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the agent's pods in %s are still there after %s: nothing else was removed; run uninstall again", o.namespace, o.timeout)
	}
	for _, obj := range rest {
		if err := remove(obj); err != nil {
			return err
		}
	}
	for _, name := range []string{deployKeySecret, admission.SecretName} {
		if err := remove(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: name}}); err != nil {
			return err
		}
	}
	for _, name := range []string{v1alpha1.NotifyStateConfigMap, v1alpha1.RelayConfigMap} {
		if err := remove(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: name}}); err != nil {
			return err
		}
	}
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		cfg := &unstructured.Unstructured{}
		cfg.SetAPIVersion("admissionregistration.k8s.io/v1")
		cfg.SetKind(kind)
		cfg.SetName(admission.ConfigurationName(o.namespace))
		if err := remove(cfg); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "removed the agent from namespace %s; its Syncs and their objects stay\n", o.namespace)
	if !o.crds {
		return nil
	}
	for i := range syncs.Items {
		s := &syncs.Items[i]
		patch := client.MergeFrom(s.DeepCopy())
		if controllerutil.RemoveFinalizer(s, v1alpha1.Finalizer) {
			if err := c.Patch(ctx, s, patch); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("remove the finalizer of Sync %s/%s: %w", s.Namespace, s.Name, err)
			}
		}
	}
	for _, obj := range objs {
		if obj.GetKind() == "CustomResourceDefinition" || strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") {
			if err := remove(obj); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "removed the Sync CRD and %d Syncs; the objects they managed stay, still labelled %s\n", len(syncs.Items), v1alpha1.SyncLabel)
	return nil
}
