package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/api/v1alpha1"
)

// overlays is one Sync of a repository of Kustomize apps, each an overlay
// of one shared base: the render cache's case. A commit to one app's
// directory must build that app's kustomization only.
type overlays struct {
	Apps    int `json:"apps"`
	Objects int `json:"objects"`
	// First is the first sync, which builds every kustomization.
	First overlayChange `json:"first_sync"`
	// OneApp is a commit to one app's kustomization; SharedBase a commit
	// to the base every app uses, which builds them all again: the
	// baseline, measured in the same run.
	OneApp     overlayChange `json:"one_app_commit"`
	SharedBase overlayChange `json:"shared_base_commit"`
	// OneAppOverBase is OneApp's time to Ready over SharedBase's.
	OneAppOverBase float64 `json:"one_app_over_shared_base"`
}

// overlayChange is one sync of the overlays' Sync.
type overlayChange struct {
	// Ready is from the trigger (creating the Sync, or a spec edit after
	// the commit) until the Sync was Ready at the commit.
	Ready  float64 `json:"ready_s"`
	Engine float64 `json:"engine_s"`
	Built  float64 `json:"kustomizations_built"`
	Reused float64 `json:"kustomizations_reused"`
	Writes int     `json:"writes"`
}

// runOverlays measures apps overlays on a control plane of their own.
func runOverlays(ctx context.Context, o options, apps int) (_ *overlays, err error) {
	b, stop, err := startBench(ctx, o, "overlays")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	env, dir := b.env, b.dir
	if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "overlays"}}); err != nil {
		return nil, err
	}
	repo, err := newGitRepo(filepath.Join(dir, "git"))
	if err != nil {
		return nil, err
	}
	files := map[string]string{
		"base/kustomization.yaml": "resources: [deployment.yaml]\n",
		"base/deployment.yaml":    overlayBase("nginx:1.27"),
	}
	for i := range apps {
		files[overlayFile(i)] = overlayKustomization(i, "v1")
	}
	rev, err := repo.commit("initial", files)
	if err != nil {
		return nil, err
	}
	a, err := startAgent(ctx, env.Config, o.limits, o.concurrent, false, io.Discard)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, a.stop()) }()
	const name = "overlays"
	sw, err := watchSync(ctx, b.admin, name)
	if err != nil {
		return nil, err
	}
	defer sw.stop()

	r := &overlays{Apps: apps, Objects: 2 * apps}
	measure := func(c *overlayChange, revision string, trigger func() error) error {
		built, reused := kustomizeBuilds()
		before, _ := a.requests.snapshot()
		start := time.Now()
		if err := trigger(); err != nil {
			return err
		}
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		s, at, err := sw.until(waitCtx, revision, func(s *v1alpha1.Sync) bool { return syncedAt(s, revision) })
		if err != nil {
			return err
		}
		c.Ready = at.Sub(start).Seconds()
		if len(s.Status.History) > 0 {
			d, _ := time.ParseDuration(s.Status.History[0].Duration)
			c.Engine = d.Seconds()
		}
		b2, r2 := kustomizeBuilds()
		c.Built, c.Reused = b2-built, r2-reused
		after, _ := a.requests.snapshot()
		c.Writes = after.minus(before).writes()
		return nil
	}

	step("one Sync of %d Kustomize overlays of one base (%d objects)", apps, r.Objects)
	err = measure(&r.First, rev, func() error {
		s := newSync(name, repo.url(), time.Hour, o.syncTimeout)
		s.Spec.Paths = []string{"apps"}
		s.Spec.TargetNamespace = "overlays"
		return b.admin.Create(ctx, s)
	})
	if err != nil {
		return nil, err
	}
	step("first sync: Ready in %.2f s (engine %.2f s), %.0f kustomizations built", r.First.Ready, r.First.Engine, r.First.Built)

	n := 0
	commit := func(c *overlayChange, message string, changed map[string]string) error {
		rev, err := repo.commit(message, changed)
		if err != nil {
			return err
		}
		n++
		return measure(c, rev, func() error { return b.nudge(ctx, name, n) })
	}
	if err := commit(&r.OneApp, "app 7: config v2", map[string]string{overlayFile(7): overlayKustomization(7, "v2")}); err != nil {
		return nil, err
	}
	step("one app's commit: Ready in %.2f s (engine %.2f s), %.0f built, %.0f reused, %d writes",
		r.OneApp.Ready, r.OneApp.Engine, r.OneApp.Built, r.OneApp.Reused, r.OneApp.Writes)
	if err := commit(&r.SharedBase, "base: nginx 1.28", map[string]string{"base/deployment.yaml": overlayBase("nginx:1.28")}); err != nil {
		return nil, err
	}
	step("the shared base's commit: Ready in %.2f s (engine %.2f s), %.0f built, %.0f reused, %d writes",
		r.SharedBase.Ready, r.SharedBase.Engine, r.SharedBase.Built, r.SharedBase.Reused, r.SharedBase.Writes)
	if r.SharedBase.Ready > 0 {
		r.OneAppOverBase = r.OneApp.Ready / r.SharedBase.Ready
	}
	return r, nil
}

func overlayFile(i int) string { return fmt.Sprintf("apps/app-%03d/kustomization.yaml", i) }

func overlayKustomization(i int, version string) string {
	return fmt.Sprintf(`namePrefix: app-%03d-
resources: [../../base]
configMapGenerator:
- name: config
  literals: [CONFIG_VERSION=%s]
`, i, version)
}

func overlayBase(image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: %s
        envFrom: [{configMapRef: {name: config}}]
`, image)
}

// kustomizeBuilds is driftless_kustomize_builds_total, built and reused,
// over every agent this process ran.
func kustomizeBuilds() (built, reused float64) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, 0
	}
	for _, f := range families {
		if f.GetName() != "driftless_kustomize_builds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() != "result":
				case l.GetValue() == "built":
					built += m.GetCounter().GetValue()
				case l.GetValue() == "reused":
					reused += m.GetCounter().GetValue()
				}
			}
		}
	}
	return built, reused
}
