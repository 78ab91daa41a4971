package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
)

// A Flux v1 user swaps the image and command of their Deployment and keeps
// the flags (the root Sync's options; internal/cli tests the flags): the
// agent must create the root Sync from them and keep the cluster equal to
// git, commit after commit and edit after edit.
func TestAgentWithFluxV1OptionsKeepsTheClusterEqualToGit(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	appNS := ns + "-app"
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}})
	})
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	deployKey := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git-deploy", Namespace: ns},
		Data:       map[string][]byte{"identity": srv.DeployKey, "known_hosts": srv.KnownHosts()},
	}
	if err := c.Create(ctx, deployKey); err != nil {
		t.Fatal(err)
	}
	first := repo.Commit(t, "initial", map[string]string{
		"namespaces/app.yaml":   "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + appNS + "\n",
		"workloads/config.yaml": agenttest.ConfigMap(appNS, "web-config", "v1"),
		"workloads/web.yaml":    agenttest.Deployment(appNS, "web"),
		"elsewhere/extra.yaml":  agenttest.ConfigMap(appNS, "not-in-a-git-path", "v1"),
	})

	o := agenttest.Options(t, env.Config, ns)
	o.GitURL, o.GitBranch, o.GitPaths = repo.SSHURL(), "main", []string{"namespaces", "workloads"}
	o.SyncInterval = 2 * time.Second
	o.GitSecret = "git-deploy"
	a := agenttest.Start(t, o)
	root := client.ObjectKey{Namespace: ns, Name: "default"}

	// The root Sync mirrors the flags.
	var sync v1alpha1.Sync
	a.Eventually("the root Sync is created", func() string {
		if err := c.Get(ctx, root, &sync); err != nil {
			return err.Error()
		}
		return ""
	})
	type fromFlags struct {
		Source   v1alpha1.Source
		Paths    []string
		Interval time.Duration
	}
	want := fromFlags{
		Source: v1alpha1.Source{Git: v1alpha1.GitSource{
			URL:       repo.SSHURL(),
			Branch:    "main",
			SecretRef: &v1alpha1.LocalObjectReference{Name: "git-deploy"},
		}},
		Paths:    []string{"namespaces", "workloads"},
		Interval: 2 * time.Second,
	}
	got := fromFlags{Source: sync.Spec.Source, Paths: sync.Spec.Paths, Interval: sync.Spec.Interval.Duration}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("root Sync spec does not mirror the options (-want +got):\n%s", diff)
	}

	// The first commit is applied, and only its git paths.
	a.Eventually("the root Sync is Ready at the first commit", agenttest.AppliedAt(c, root, first))
	if v := agenttest.Greeting(t, c, appNS, "web-config"); v != "v1" {
		t.Errorf("web-config greeting = %q, want v1", v)
	}
	var web appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: appNS, Name: "web"}, &web); err != nil {
		t.Errorf("the Deployment from workloads/ was not applied: %v", err)
	} else if web.Spec.Replicas == nil || *web.Spec.Replicas != 0 {
		t.Errorf("Deployment web replicas = %v, want 0", web.Spec.Replicas)
	}
	if v := agenttest.Greeting(t, c, appNS, "not-in-a-git-path"); v != "" {
		t.Error("a ConfigMap outside GitPaths (--git-path) was applied")
	}
	a.Eventually("an Event on the root Sync reports the first commit", syncEventContains(ns, "applied "+first[:7]+": "))

	// A new commit is applied at the next interval, with no other nudge.
	second := repo.Commit(t, "new greeting", map[string]string{"workloads/config.yaml": agenttest.ConfigMap(appNS, "web-config", "v2")})
	a.Eventually("the root Sync is Ready at the second commit", agenttest.AppliedAt(c, root, second))
	if v := agenttest.Greeting(t, c, appNS, "web-config"); v != "v2" {
		t.Errorf("web-config greeting after the second commit = %q, want v2", v)
	}

	// A hand edit is put back by a later interval.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: appNS, Name: "web-config"}, &cm); err != nil {
			return err
		}
		cm.Data["greeting"] = "edited by hand"
		return c.Update(ctx, &cm, client.FieldOwner("kubectl-edit"))
	})
	if err != nil {
		t.Fatalf("edit web-config: %v", err)
	}
	a.Eventually("the hand edit of web-config is reverted", func() string {
		if v := agenttest.Greeting(t, c, appNS, "web-config"); v != "v2" {
			return fmt.Sprintf("greeting = %q, want v2 from git", v)
		}
		return ""
	})

	if err := a.Stop(); err != nil {
		t.Errorf("the agent did not shut down cleanly: %v", err)
	}
}

// syncEventContains checks that an Event on the root Sync in namespace
// has a note containing want.
func syncEventContains(namespace, want string) func() string {
	return func() string {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			return err.Error()
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == v1alpha1.SyncKind && e.Regarding.Name == "default" {
				if strings.Contains(e.Note, want) {
					return ""
				}
				notes = append(notes, e.Note)
			}
		}
		return fmt.Sprintf("no note contains %q; notes: %q", want, notes)
	}
}
