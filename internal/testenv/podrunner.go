package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DriftlessImage is the repository of the image the install manifests
// run (config/manager/deployment.yaml); a PodRunner maps it to the locally
// built driftless binary.
const DriftlessImage = "ghcr.io/driftless/driftless"

// PodRunner plays the kubelet's part on the simulated node, for the Pods
// that opt in: a Pod scheduled there with a container whose image
// repository is a key of Images. kwok still writes every Pod's status
// (Running and Ready at once); the runner only runs the process.
//
// For such a container it runs Images[repository] with the container's
// args as a local process, as the Pod's ServiceAccount: it asks the API
// server for a token bound to the Pod (TokenRequest, as a kubelet does,
// renewed before it expires) and hands the process a kubeconfig that uses
// it (KUBECONFIG), so the process has exactly the RBAC its ServiceAccount
// was granted. It stops the process (SIGTERM, then SIGKILL after the Pod's
// grace period, at most 10 s) when the Pod is deleted, finishes or leaves
// the node, and restarts it with a back-off when it exits, as
// restartPolicy Always does. Its processes die with the runner however
// the runner ends (StartTied).
//
// What differs from a kubelet, and why it is a device of the local
// cluster only:
//   - the process shares the host's network, filesystem and user: there is
//     no container, no image and no network namespace;
//   - env: literal values, fieldRef (metadata.namespace, metadata.name,
//     metadata.uid, spec.serviceAccountName, spec.nodeName) and
//     secretKeyRef/configMapKeyRef are resolved; envFrom is not;
//   - volumes: an emptyDir mounted at /tmp becomes a directory of the
//     Pod's own, passed as TMPDIR; no other volume is materialised (the
//     agent reads its git Secret through the API, not from a volume);
//   - ports: the addresses `driftless agent` listens on by default (:8080
//     metrics, :8081 probes) would collide between Pods and with the host,
//     so the runner appends --metrics-bind-address=0 and
//     --health-probe-bind-address=127.0.0.1:PORT (a free port) to the
//     args of an agent; the flags given last win;
//   - the container's command stands for the image's entrypoint: its first
//     word is replaced by the binary, the rest and the args are kept;
//   - probes are not run: readiness is kwok's.
//
// Each Pod's process logs to Dir/<namespace>_<name>_<uid>.log.
type PodRunner struct {
	// Config reaches the API server as an identity that may watch Pods,
	// read Secrets and ConfigMaps, and create service account tokens.
	Config *rest.Config
	// Images maps an image repository (the image without its tag or
	// digest) to the local binary that runs it.
	Images map[string]string
	// Dir holds each Pod's log, kubeconfig, token and temporary directory.
	Dir string
	// Node is the node whose Pods the runner runs; SimulatedNodeName when
	// empty.
	Node string

	cs      kubernetes.Interface
	mu      sync.Mutex
	running map[types.UID]*podProcess
}

// podProcess is one Pod's supervised process.
type podProcess struct {
	pod    types.NamespacedName
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	pid    int // of the running process; 0 between runs
}

// Processes returns the pid of every Pod's running process, by the Pod's
// namespace/name.
func (r *PodRunner) Processes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, p := range r.running {
		p.mu.Lock()
		if p.pid != 0 {
			out[p.pod.String()] = p.pid
		}
		p.mu.Unlock()
	}
	return out
}

// Run runs the opted-in Pods until ctx is done, then stops their
// processes and returns.
func (r *PodRunner) Run(ctx context.Context) error {
	if r.Node == "" {
		r.Node = SimulatedNodeName
	}
	cs, err := kubernetes.NewForConfig(r.Config)
	if err != nil {
		return err
	}
	r.cs = cs
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return err
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.OneTermEqualSelector("spec.nodeName", r.Node))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke}); err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			r.stopAll()
			return nil
		case <-changed:
			r.sync(ctx, inf.GetStore().List())
		}
	}
}

// sync starts a process for every opted-in live Pod that has none and
// stops those whose Pod is gone.
func (r *PodRunner) sync(ctx context.Context, objs []any) {
	want := map[types.UID]*corev1.Pod{}
	for _, o := range objs {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, _, ok := r.container(pod); ok {
			want[pod.UID] = pod
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == nil {
		r.running = map[types.UID]*podProcess{}
	}
	for uid, p := range r.running {
		if want[uid] == nil {
			p.cancel()
			<-p.done
			delete(r.running, uid)
		}
	}
	for uid, pod := range want {
		if r.running[uid] != nil {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		p := &podProcess{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, cancel: cancel, done: make(chan struct{})}
		r.running[uid] = p
		go func() {
			defer close(p.done)
			r.supervise(pctx, p, pod.DeepCopy())
		}()
	}
}

func (r *PodRunner) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, p := range r.running {
		p.cancel()
		<-p.done
		delete(r.running, uid)
	}
}

// container returns the Pod's container whose image the runner runs, and
// the binary for it.
func (r *PodRunner) container(pod *corev1.Pod) (corev1.Container, string, bool) {
	for _, c := range pod.Spec.Containers {
		if bin, ok := r.Images[imageRepository(c.Image)]; ok {
			return c, bin, true
		}
	}
	return corev1.Container{}, "", false
}

// imageRepository is an image reference without its tag and digest.
func imageRepository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// supervise runs the Pod's process until ctx is done, restarting it with
// a back-off (1 s doubling to 30 s) when it exits.
func (r *PodRunner) supervise(ctx context.Context, p *podProcess, pod *corev1.Pod) {
	dir := filepath.Join(r.Dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
	logPath := dir + ".log"
	logf := func(format string, args ...any) {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "podrunner %s: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	}
	defer os.RemoveAll(dir)
	backoff := time.Second
	for ctx.Err() == nil {
		started := time.Now()
		err := r.runOnce(ctx, p, pod, dir, logPath, logf)
		if ctx.Err() != nil {
			logf("stopped: the Pod is gone")
			return
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		logf("exited (%v); restarting in %s", err, backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// runOnce prepares the Pod's identity and environment, runs its process
// and waits until it exits or ctx is done (then stops it).
func (r *PodRunner) runOnce(ctx context.Context, p *podProcess, pod *corev1.Pod, dir, logPath string, logf func(string, ...any)) error {
	c, bin, _ := r.container(pod)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return err
	}
	tokenPath := filepath.Join(dir, "token")
	expires, err := r.writeToken(ctx, pod, tokenPath)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := r.writeKubeconfig(kubeconfig, tokenPath); err != nil {
		return err
	}
	env, err := r.env(ctx, pod, c)
	if err != nil {
		return err
	}
	env = append(env, "KUBECONFIG="+kubeconfig, "HOME="+dir, "PATH="+os.Getenv("PATH"))
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/tmp" && isEmptyDir(pod, m.Name) {
			env = append(env, "TMPDIR="+filepath.Join(dir, "tmp"))
		} else {
			logf("volume %s at %s is not materialised", m.Name, m.MountPath)
		}
	}
	probePort, err := freePorts(1)
	if err != nil {
		return err
	}
	args := append(commandArgs(c), c.Args...)
	if len(args) > 0 && args[0] == "agent" {
		args = append(args, "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort[0]))
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, logFile, logFile
	logf("starting %s as system:serviceaccount:%s:%s", bin, pod.Namespace, serviceAccount(pod))
	if err := StartTied(cmd); err != nil {
		return err
	}
	p.mu.Lock()
	p.pid = cmd.Process.Pid
	p.mu.Unlock()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.pid = 0
		p.mu.Unlock()
		exited <- err
	}()
	renew := time.NewTimer(time.Until(expires) * 4 / 5)
	defer renew.Stop()
	for {
		select {
		case err := <-exited:
			return err
		case <-renew.C:
			if expires, err = r.writeToken(ctx, pod, tokenPath); err != nil {
				logf("renew the token: %v", err)
				renew.Reset(10 * time.Second)
			} else {
				renew.Reset(time.Until(expires) * 4 / 5)
			}
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			grace := 10 * time.Second
			if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second < grace {
				grace = time.Duration(*g) * time.Second
			}
			select {
			case err := <-exited:
				return err
			case <-time.After(grace):
				_ = cmd.Process.Kill()
				return <-exited
			}
		}
	}
}

// commandArgs are the container's command after the entrypoint, which
// the binary stands for.
func commandArgs(c corev1.Container) []string {
	if len(c.Command) > 1 {
		return c.Command[1:]
	}
	return nil
}

func serviceAccount(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

func isEmptyDir(pod *corev1.Pod, volume string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == volume {
			return v.EmptyDir != nil
		}
	}
	return false
}

// writeToken asks for a token of the Pod's ServiceAccount, bound to the
// Pod (it stops working once the Pod is deleted), writes it to path and
// returns when it expires.
func (r *PodRunner) writeToken(ctx context.Context, pod *corev1.Pod, path string) (time.Time, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptrTo(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	tr, err := r.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, serviceAccount(pod), req, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("token of ServiceAccount %s/%s for Pod %s: %w", pod.Namespace, serviceAccount(pod), pod.Name, err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tr.Status.Token), 0o600); err != nil {
		return time.Time{}, err
	}
	return tr.Status.ExpirationTimestamp.Time, os.Rename(tmp, path)
}

// writeKubeconfig writes a kubeconfig for the API server of Config that
// authenticates with the token file (client-go reads it again as it
// changes).
func (r *PodRunner) writeKubeconfig(path, tokenPath string) error {
	ca := r.Config.CAData
	if len(ca) == 0 && r.Config.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(r.Config.CAFile); err != nil {
			return err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: r.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["pod"] = &clientcmdapi.AuthInfo{TokenFile: tokenPath}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "pod"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

// env resolves the container's environment variables.
func (r *PodRunner) env(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]string, error) {
	var env []string
	for _, e := range c.Env {
		v, err := r.envValue(ctx, pod, e)
		if err != nil {
			return nil, fmt.Errorf("env %s of Pod %s/%s: %w", e.Name, pod.Namespace, pod.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func (r *PodRunner) envValue(ctx context.Context, pod *corev1.Pod, e corev1.EnvVar) (string, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return e.Value, nil
	case from.FieldRef != nil:
		switch from.FieldRef.FieldPath {
		case "metadata.namespace":
			return pod.Namespace, nil
		case "metadata.name":
			return pod.Name, nil
		case "metadata.uid":
			return string(pod.UID), nil
		case "spec.serviceAccountName":
			return serviceAccount(pod), nil
		case "spec.nodeName":
			return pod.Spec.NodeName, nil
		}
		return "", fmt.Errorf("fieldRef %s is not supported by the local cluster's pod runner", from.FieldRef.FieldPath)
	case from.SecretKeyRef != nil:
		s, err := r.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return string(s.Data[from.SecretKeyRef.Key]), nil
	case from.ConfigMapKeyRef != nil:
		cm, err := r.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return cm.Data[from.ConfigMapKeyRef.Key], nil
	}
	return "", errors.New("this valueFrom is not supported by the local cluster's pod runner")
}

func ptrTo[T any](v T) *T { return &v }
