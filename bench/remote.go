package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
	"github.com/driftless/driftless/internal/testenv/apimetrics"
)

// remoteFleet is one agent driving Syncs of several remote clusters
// (spec.kubeConfig), against the same number of Syncs of the agent's own
// cluster, measured first by the same agent in the same run (the
// baseline). The remote clusters are kubeconfig Secrets, each with a
// token of its own ServiceAccount, over fewer real control planes
// (Planes): the agent builds one set of clients, one rate limiter and one
// watch cache per Secret, whatever control plane answers it.
type remoteFleet struct {
	Clusters        int `json:"clusters"`
	Planes          int `json:"control_planes"`
	SyncsPerCluster int `json:"syncs_per_cluster"`
	// Local and Remote are the baseline's and the remote clusters'
	// phases.
	Local  remotePhase `json:"local"`
	Remote remotePhase `json:"remote"`
	// ReadyRatio is Remote.AllReady / Local.AllReady; HeapRatio the
	// same of their heap growth.
	ReadyRatio float64 `json:"ready_ratio"`
	HeapRatio  float64 `json:"heap_ratio"`
	// HeapPerCluster is the remote phase's heap growth above the
	// baseline's, per remote cluster.
	HeapPerCluster float64 `json:"heap_per_cluster_mib"`
	// RequestsPerCluster is the requests the remote control planes
	// served during the remote phase (their /metrics, every client),
	// per remote cluster; WatchesPerCluster their open watches after.
	RequestsPerCluster float64 `json:"requests_per_cluster"`
	WatchesPerCluster  float64 `json:"watches_per_cluster"`
}

// remotePhase is the creation of one phase's Syncs until all are Ready.
type remotePhase struct {
	Syncs    int     `json:"syncs"`
	AllReady float64 `json:"all_ready_s"`
	// HeapGrowth is the process's live heap after, less before (MiB).
	HeapGrowth float64 `json:"heap_growth_mib"`
	// AgentClusterRequests is what the agent asked of its own cluster.
	AgentClusterRequests requestSummary `json:"agent_cluster_requests"`
}

// runRemoteFleet measures clusters remote clusters of syncs Syncs each,
// over planes control planes, after as many Syncs of the agent's own
// cluster (clusters × syncs), the baseline.
func runRemoteFleet(ctx context.Context, o options, clusters, planes, syncs int) (_ *remoteFleet, err error) {
	b, stop, err := startBench(ctx, o, "remote")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	step("starting %d more control planes", planes)
	var envs []*testenv.Env
	defer func() {
		for _, e := range envs {
			err = errors.Join(err, e.Stop())
		}
	}()
	for range planes {
		startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		e, err := testenv.Start(startCtx)
		cancel()
		if err != nil {
			return nil, err
		}
		envs = append(envs, e)
	}

	// One workload per cluster and one for the baseline, each under a
	// prefix of its own, all in one repository.
	local := newWorkload("l", clusters*syncs)
	files := map[string]string{}
	for k, v := range local.files {
		files[k] = v
	}
	for _, ns := range local.namespaces {
		if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	remote := make([]*workload, clusters)
	for i := range clusters {
		remote[i] = newWorkload(fmt.Sprintf("r%02d", i), syncs)
		for k, v := range remote[i].files {
			files[k] = v
		}
		plane := envs[i%planes]
		admin, err := client.New(plane.Config, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		for _, ns := range remote[i].namespaces {
			if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return nil, err
			}
		}
		kubeconfig, err := remoteKubeconfig(ctx, plane, admin, fmt.Sprintf("driftless-remote-%02d", i))
		if err != nil {
			return nil, err
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: remoteSecret(i)},
			Data: map[string][]byte{v1alpha1.KubeConfigKey: kubeconfig}}
		if err := b.admin.Create(ctx, secret); err != nil {
			return nil, err
		}
	}
	repo, err := newGitRepo(filepath.Join(b.dir, "git"))
	if err != nil {
		return nil, err
	}
	rev, err := repo.commit("initial", files)
	if err != nil {
		return nil, err
	}
	a, err := startAgent(ctx, b.env.Config, o.limits, o.concurrent, false, io.Discard)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, a.stop()) }()

	r := &remoteFleet{Clusters: clusters, Planes: planes, SyncsPerCluster: syncs}
	phase := func(p *remotePhase, n, ready int, create func(i int) *v1alpha1.Sync) error {
		p.Syncs = n
		heapBefore := readMemory().HeapMiB
		reqBefore, _ := a.requests.snapshot()
		start := time.Now()
		for i := range n {
			if err := b.admin.Create(ctx, create(i)); err != nil {
				return err
			}
		}
		if err := allReady(ctx, b.admin, ready, rev); err != nil {
			return err
		}
		p.AllReady = time.Since(start).Seconds()
		if err := quiet(ctx, a, 2*time.Second, 2*time.Minute); err != nil {
			return err
		}
		reqAfter, _ := a.requests.snapshot()
		p.AgentClusterRequests = summarize(reqAfter.minus(reqBefore))
		p.HeapGrowth = readMemory().HeapMiB - heapBefore
		return nil
	}

	step("baseline: creating %d Syncs of the agent's cluster", clusters*syncs)
	if err := phase(&r.Local, clusters*syncs, clusters*syncs, func(i int) *v1alpha1.Sync {
		s := newSync(fmt.Sprintf("local-%04d", i), repo.url(), time.Hour, o.syncTimeout)
		s.Spec.Paths = []string{local.appFile(i)}
		return s
	}); err != nil {
		return nil, err
	}
	step("baseline: %d Syncs Ready in %.1f s, heap +%.1f MiB", r.Local.Syncs, r.Local.AllReady, r.Local.HeapGrowth)

	planeBefore := make([]apimetrics.Counts, planes)
	for j, e := range envs {
		if planeBefore[j], err = apimetrics.Read(ctx, e.Clientset); err != nil {
			return nil, err
		}
	}
	step("creating %d Syncs of each of %d remote clusters (%d control planes)", syncs, clusters, planes)
	if err := phase(&r.Remote, clusters*syncs, 2*clusters*syncs, func(i int) *v1alpha1.Sync {
		cluster, app := i/syncs, i%syncs
		s := newSync(fmt.Sprintf("remote-%02d-%04d", cluster, app), repo.url(), time.Hour, o.syncTimeout)
		s.Spec.Paths = []string{remote[cluster].appFile(app)}
		s.Spec.KubeConfig = &v1alpha1.KubeConfigReference{SecretRef: v1alpha1.SecretKeyReference{Name: remoteSecret(cluster)}}
		return s
	}); err != nil {
		return nil, err
	}
	requests, watches := 0, 0
	for j, e := range envs {
		after, err := apimetrics.Read(ctx, e.Clientset)
		if err != nil {
			return nil, err
		}
		for _, v := range after.Minus(planeBefore[j]) {
			requests += v
		}
		open, err := apimetrics.OpenWatches(ctx, e.Clientset)
		if err != nil {
			return nil, err
		}
		for _, v := range open {
			watches += v
		}
	}
	r.RequestsPerCluster = float64(requests) / float64(clusters)
	r.WatchesPerCluster = float64(watches) / float64(clusters)
	r.ReadyRatio = r.Remote.AllReady / r.Local.AllReady
	if r.Local.HeapGrowth > 0 {
		r.HeapRatio = r.Remote.HeapGrowth / r.Local.HeapGrowth
	}
	r.HeapPerCluster = (r.Remote.HeapGrowth - r.Local.HeapGrowth) / float64(clusters)
	step("%d Syncs of %d remote clusters Ready in %.1f s (%.2f× the baseline), heap +%.1f MiB (%.2f×; %.2f MiB per cluster above it), %.0f requests and %.0f open watches per cluster",
		clusters*syncs, clusters, r.Remote.AllReady, r.ReadyRatio, r.Remote.HeapGrowth, r.HeapRatio, r.HeapPerCluster, r.RequestsPerCluster, r.WatchesPerCluster)
	return r, nil
}

func remoteSecret(i int) string { return fmt.Sprintf("cluster-%02d", i) }

// remoteKubeconfig makes the ServiceAccount name in e's default namespace,
// bound to cluster-admin, and returns a kubeconfig of e with a token of it.
func remoteKubeconfig(ctx context.Context, e *testenv.Env, admin client.Client, name string) ([]byte, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, binding} {
		if err := admin.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	tr, err := e.Clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, tr, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["remote"] = &clientcmdapi.Cluster{Server: e.ControlPlane.APIServerURL, CertificateAuthorityData: e.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["remote"] = &clientcmdapi.Context{Cluster: "remote", AuthInfo: name}
	cfg.CurrentContext = "remote"
	return clientcmd.Write(*cfg)
}
