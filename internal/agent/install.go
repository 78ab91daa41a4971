package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/apply"
)

// install creates or updates the Sync CRD and its admission policy, the
// agent's namespace and the root Sync.
func install(ctx context.Context, c client.Client, o Options) error {
	defs, err := crd.All()
	if err != nil {
		return err
	}
	for _, def := range defs {
		if err := installCRD(ctx, c, def); err != nil {
			return err
		}
	}
	// The policy that refuses a Sync whose namespace and name do not fit
	// its objects' label. Without it (an API server before 1.30, or no
	// permission) such a Sync is still refused, as InvalidSpec, before it
	// writes anything.
	policies, err := crd.SyncPolicies()
	if err != nil {
		return err
	}
	for _, p := range policies {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(p), client.FieldOwner(apply.FieldManager), client.ForceOwnership); err != nil {
			ctrl.Log.Info("could not install the admission policy for Sync names; over-long names stall as InvalidSpec instead",
				"kind", p.GetKind(), "name", p.GetName(), "error", err.Error())
			break
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("create namespace %s: %w", o.Namespace, err)
	}
	if o.GitURL == "" {
		return nil
	}
	root := rootSync(o)
	if err := applyTyped(ctx, c, root); err != nil {
		return fmt.Errorf("create the root Sync %s/%s: %w", root.Namespace, root.Name, err)
	}
	return nil
}

// installCRD applies def and waits until it is Established and its kind
// is served: discovery, which the agent's clients map kinds with, lists
// a new CRD's kind a moment after it is Established, and a controller
// set up before that (the agent's next step) fails to start with "no
// matches for kind".
func installCRD(ctx context.Context, c client.Client, def *apiextensionsv1.CustomResourceDefinition) error {
	def.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	kind := def.Spec.Names.Kind
	if err := applyTyped(ctx, c, def); err != nil {
		return fmt.Errorf("install the %s CRD: %w", kind, err)
	}
	if err := crd.WaitEstablished(ctx, c, def.Name); err != nil {
		return err
	}
	gk := schema.GroupKind{Group: def.Spec.Group, Kind: kind}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := c.RESTMapper().RESTMapping(gk)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the %s CRD is Established but the API server does not serve its kind: %w", kind, err)
	}
	return nil
}

func rootSync(o Options) *v1alpha1.Sync {
	s := &v1alpha1.Sync{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.SyncKind},
		ObjectMeta: metav1.ObjectMeta{Name: rootSyncName, Namespace: o.Namespace},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.Source{Git: v1alpha1.GitSource{
				URL:                      o.GitURL,
				Branch:                   o.GitBranch,
				InsecureSkipHostKeyCheck: o.InsecureSkipHostKeyCheck,
			}},
			Interval:           metav1.Duration{Duration: o.SyncInterval},
			ServiceAccountName: o.SyncServiceAccount,
		},
	}
	for _, p := range o.GitPaths {
		if p = strings.TrimSpace(p); p != "" {
			s.Spec.Paths = append(s.Spec.Paths, p)
		}
	}
	s.Spec.Wait = o.SyncWait
	if o.Shard != nil && *o.Shard != "" {
		// Served by the agent that created it.
		s.Labels = map[string]string{v1alpha1.ShardLabel: *o.Shard}
	}
	if o.GitSecret != "" {
		s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: o.GitSecret}
	}
	return s
}

// applyTyped server-side applies a typed object as the agent's installer.
func applyTyped(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(u, "status")
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner("driftless-agent"), client.ForceOwnership)
}
