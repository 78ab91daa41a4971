package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func deployment(ns, name string, replicas int, wave string, neverReady bool) string {
	podAnn := ""
	if neverReady {
		podAnn = "\n      annotations: {" + testenv.NeverReadyAnnotation + ": \"true\"}"
	}
	ann := ""
	if wave != "" {
		ann = "\n  annotations: {driftless.dev/wave: \"" + wave + "\"}"
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s%[5]s
spec:
  replicas: %[3]d
  progressDeadlineSeconds: 600
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}%[4]s
    spec:
      containers:
      - name: app
        image: nginx:1.27
`, ns, name, replicas, podAnn, ann)
}

type fixture struct {
	t    *testing.T
	ns   string
	repo *testenv.Repo
}

func newFixture(t *testing.T) *fixture {
	ns := env.Namespace(t)
	env.WaitForServiceAccount(t, ns)
	return &fixture{t: t, ns: ns, repo: testenv.NewGitServer(t).NewRepo(t, "fleet")}
}

func (f *fixture) createSync(timeout time.Duration) {
	f.t.Helper()
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: f.ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: f.repo.FileURL(), Branch: "main"}},
			Interval:        metav1.Duration{Duration: time.Hour},
			Timeout:         &metav1.Duration{Duration: timeout},
			Wait:            true,
			TargetNamespace: f.ns,
		},
	}
	if err := c.Create(context.Background(), s); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync() *v1alpha1.Sync {
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "fleet"}, &s); err != nil {
		f.t.Fatal(err)
	}
	return &s
}

func (f *fixture) deploy(name string) *appsv1.Deployment {
	var d appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &d); err != nil {
		return nil
	}
	return &d
}

func available(d *appsv1.Deployment) bool {
	return d != nil && d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas &&
		d.Status.UpdatedReplicas == *d.Spec.Replicas
}

func TestSyncIsReadyOnlyWhenTheRolloutIsAvailable(t *testing.T) {
	f := newFixture(t)
	rev := f.repo.Commit(t, "web", map[string]string{"web.yaml": deployment(f.ns, "web", 2, "", false)})
	f.createSync(2 * time.Minute)
	startAgent(t, f.ns)
	eventually(t, "Ready at the commit", 90*time.Second, func() (bool, string) {
		s := f.sync()
		return meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) && s.Status.LastAppliedRevision == rev,
			fmt.Sprintf("%+v", s.Status.Conditions)
	})
	if d := f.deploy("web"); !available(d) {
		t.Errorf("the Sync is Ready but the Deployment is not available: %+v", d.Status)
	}
	if p := f.sync().Status.Progress; p != nil {
		t.Errorf("status.progress = %+v after the sync ended, want none", p)
	}
}

func TestARolloutThatNeverBecomesReadyTimesOutNamingIt(t *testing.T) {
	f := newFixture(t)
	f.repo.Commit(t, "stuck", map[string]string{"web.yaml": deployment(f.ns, "stuck", 1, "", true)})
	f.createSync(15 * time.Second)
	startAgent(t, f.ns)
	eventually(t, "HealthCheckFailed", 90*time.Second, func() (bool, string) {
		cond := meta.FindStatusCondition(f.sync().Status.Conditions, v1alpha1.ConditionReady)
		return cond != nil && cond.Reason == v1alpha1.ReasonHealthCheckFailed, fmt.Sprintf("%+v", cond)
	})
	cond := meta.FindStatusCondition(f.sync().Status.Conditions, v1alpha1.ConditionReady)
	for _, want := range []string{"Deployment/" + f.ns + "/stuck", "InProgress", "web.yaml", "timed out"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("Ready message lacks %q: %s", want, cond.Message)
		}
	}
}

func TestAFixPushedDuringTheWaitIsAppliedAtOnce(t *testing.T) {
	f := newFixture(t)
	f.repo.Commit(t, "stuck", map[string]string{"web.yaml": deployment(f.ns, "web", 1, "", true)})
	f.createSync(10 * time.Minute) // far longer than the test may wait
	startAgent(t, f.ns)
	eventually(t, "the health wait", 60*time.Second, func() (bool, string) {
		s := f.sync()
		return s.Status.Progress != nil && meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReconciling),
			fmt.Sprintf("%+v", s.Status)
	})
	fix := f.repo.Commit(t, "fix the readiness", map[string]string{"web.yaml": deployment(f.ns, "web", 1, "", false)})
	eventually(t, "the fix applied and Ready", 90*time.Second, func() (bool, string) {
		s := f.sync()
		return meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) && s.Status.LastAppliedRevision == fix,
			fmt.Sprintf("%+v", s.Status.Conditions)
	})
}

func TestWaveTwoStartsOnlyWhenWaveOneIsHealthy(t *testing.T) {
	f := newFixture(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after\n  annotations: {driftless.dev/wave: \"1\"}\ndata: {k: v}\n"
	f.repo.Commit(t, "waves", map[string]string{
		"a.yaml": cm,
		"b.yaml": deployment(f.ns, "db", 2, "0", false),
	})
	f.createSync(2 * time.Minute)
	startAgent(t, f.ns)
	var cfg corev1.ConfigMap
	eventually(t, "the wave-1 ConfigMap", 90*time.Second, func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "after"}, &cfg)
		return err == nil, fmt.Sprint(err)
	})
	d := f.deploy("db")
	var availableSince metav1.Time
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
			availableSince = cond.LastTransitionTime
		}
	}
	if availableSince.IsZero() {
		t.Fatalf("wave 1 was applied while wave 0's Deployment is not available: %+v", d.Status)
	}
	if cfg.CreationTimestamp.Before(&availableSince) {
		t.Errorf("wave 1 created at %s, before wave 0 became available at %s", cfg.CreationTimestamp, availableSince)
	}
}

func TestAMigrationJobHoldsTheNextWaveUntilItSucceeds(t *testing.T) {
	f := newFixture(t)
	job := `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {driftless.dev/wave: "0"}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: busybox}]
`
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after\n  annotations: {driftless.dev/wave: \"1\"}\ndata: {k: v}\n"
	f.repo.Commit(t, "migrate then configure", map[string]string{"a.yaml": cm, "b.yaml": job})
	f.createSync(2 * time.Minute)
	startAgent(t, f.ns)
	var cfg corev1.ConfigMap
	eventually(t, "the wave-1 ConfigMap", 90*time.Second, func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "after"}, &cfg)
		return err == nil, fmt.Sprint(err)
	})
	var j batchv1.Job
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "migrate"}, &j); err != nil {
		t.Fatal(err)
	}
	var completed *metav1.Time
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
			completed = &cond.LastTransitionTime
		}
	}
	if completed == nil {
		t.Fatalf("wave 1 was applied before the Job succeeded: %+v", j.Status)
	}
	if cfg.CreationTimestamp.Before(completed) {
		t.Errorf("wave 1 created at %s, before the Job completed at %s", cfg.CreationTimestamp, completed)
	}
}
