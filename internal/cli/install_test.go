package cli

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/testenv"
)

// The YAML of install --export is accepted by the real API server
// (server-side dry-run apply with kubectl), runs the agent with flags the
// agent has, on a read-only root filesystem as non-root, and holds no
// private key.
func TestInstallExportIsValidAndRunsTheAgentWithItsRealFlags(t *testing.T) {
	diffClusterClient(t) // the Sync CRD
	ns := env.Namespace(t)
	r := runCLI(t, "install", "--export", "--namespace", ns, "--git-url", "ssh://git@github.com/org/fleet.git",
		"--git-branch", "main", "--git-path", "a,b", "--sync-interval", "1m").expect(t, 0)
	var deployment *appsv1.Deployment
	for _, u := range exportedObjects(t, r.out) {
		if u.GetKind() == "Secret" {
			t.Errorf("--export prints Secret %s", u.GetName())
		}
		if u.GetKind() == "Deployment" {
			deployment = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, deployment); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deployment == nil || deployment.Namespace != ns {
		t.Fatalf("--export prints no Deployment in namespace %s:\n%s", ns, r.out)
	}
	pod := deployment.Spec.Template.Spec
	agent := newAgentCommand()
	args := pod.Containers[0].Args
	want := []string{"agent", "--git-url=ssh://git@github.com/org/fleet.git", "--git-branch=main", "--git-path=a,b", "--sync-interval=1m0s", "--git-secret=driftless-git-deploy", "--sync-service-account=driftless-root"}
	if strings.Join(args, " ") != strings.Join(want, " ") {
		t.Errorf("args = %q, want %q", args, want)
	}
	for _, a := range args[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if agent.Flags().Lookup(name) == nil {
			t.Errorf("the Deployment passes --%s, which driftless agent does not have", name)
		}
	}
	sc := pod.Containers[0].SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("the agent does not run as non-root on a read-only root filesystem: %+v %+v", pod.SecurityContext, sc)
	}
	if len(pod.Volumes) == 0 || pod.Volumes[0].EmptyDir == nil {
		t.Errorf("the agent has no writable emptyDir for its checkouts: %+v", pod.Volumes)
	}
}

// install makes a deploy key, trusts the git host's key it fetched and
// prints, prints the public key, and keeps the key when run again;
// identity prints the same key.
func TestInstallMakesADeployKeyThatIdentityPrintsAndAReinstallKeeps(t *testing.T) {
	diffClusterClient(t)
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	kubeconfig := env.ControlPlane.KubeconfigPath()
	install := func() cliResult {
		return runCLI(t, "install", "--kubeconfig", kubeconfig, "--namespace", ns, "--git-url", repo.SSHURL(),
			"--git-branch", "main", "--sync-interval", "1m", "--wait=false").expect(t, 0)
	}
	first := install()
	if fp := ssh.FingerprintSHA256(srv.HostKey); !strings.Contains(first.errOut, fp) {
		t.Errorf("install does not print the host key's fingerprint %s:\n%s", fp, first.errOut)
	}
	_, public, ok := strings.Cut(first.out, "read-only deploy key:\n\n")
	public = strings.TrimSpace(public)
	if !ok || !strings.HasPrefix(public, "ssh-ed25519 ") {
		t.Fatalf("install does not print an ed25519 public key:\n%s", first.out)
	}
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "driftless-git-deploy"}, &secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data["known_hosts"], srv.KnownHosts()) {
		t.Errorf("known_hosts = %q, want the git server's %q", secret.Data["known_hosts"], srv.KnownHosts())
	}
	signer, err := ssh.ParsePrivateKey(secret.Data["identity"])
	if err != nil || !strings.HasPrefix(public, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))) {
		t.Errorf("the printed key is not the Secret's (%v)", err)
	}
	if id := runCLI(t, "identity", "--kubeconfig", kubeconfig, "--namespace", ns).expect(t, 0); strings.TrimSpace(id.out) != public {
		t.Errorf("identity = %q, want %q", id.out, public)
	}
	again := install()
	if !strings.Contains(again.out, public) || !strings.Contains(again.errOut, "keeping the deploy key") {
		t.Errorf("a second install does not keep the deploy key:\n%s\n%s", again.out, again.errOut)
	}
}

func TestInstallRefusesAGitHostWhoseKeyCannotBeFetched(t *testing.T) {
	diffClusterClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := runCLI(t, "install", "--kubeconfig", env.ControlPlane.KubeconfigPath(), "--namespace", env.Namespace(t),
		"--git-url", "ssh://git@"+addr+"/fleet.git", "--wait=false").expect(t, 2)
	for _, want := range []string{"fetch the SSH host key of " + addr, "--known-hosts FILE"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("error lacks %q: %s", want, r.errOut)
		}
	}
}

// install --shards 2 exports the agent's Deployment, now serving the Syncs
// without a shard label, and one Deployment per shard, each running
// agent --shard=shard-N; the API server accepts them, their pods are
// selected by their own Deployment only, and each one's flags become the
// agent options of its shard.
func TestInstallShardsExportsADeploymentPerShard(t *testing.T) {
	diffClusterClient(t) // the Sync CRD
	ns := env.Namespace(t)
	r := runCLI(t, "install", "--export", "--namespace", ns, "--git-url", "ssh://git@github.com/org/fleet.git", "--shards", "2").expect(t, 0)
	deployments := map[string]*appsv1.Deployment{}
	for _, u := range exportedObjects(t, r.out) {
		if u.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
			deployments[d.Name] = d
		}
	}
	want := map[string]string{"driftless": "", "driftless-shard-1": "shard-1", "driftless-shard-2": "shard-2"}
	if len(deployments) != len(want) {
		t.Fatalf("Deployments %v, want %v", slices.Sorted(maps.Keys(deployments)), slices.Sorted(maps.Keys(want)))
	}
	for name, shard := range want {
		d := deployments[name]
		if d == nil {
			t.Errorf("no Deployment %s", name)
			continue
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		o := agentFlags(t, io.Discard, append(args[1:], "--kubeconfig", env.ControlPlane.KubeconfigPath())...)
		if o.Shard == nil || *o.Shard != shard {
			t.Errorf("Deployment %s runs %q: shard %v, want %q", name, args, o.Shard, shard)
		}
		if hasGitURL := o.GitURL != ""; hasGitURL != (shard == "") {
			t.Errorf("Deployment %s runs %q: only the agent of the unlabelled Syncs makes the root Sync", name, args)
		}
		for other, od := range deployments {
			sel, err := metav1.LabelSelectorAsSelector(od.Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			if other != name && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("Deployment %s selects the pods of %s", other, name)
			}
		}
	}
}

// exportedObjects checks that the API server accepts the YAML install
// --export printed (a server-side dry-run apply with kubectl) and returns
// its objects.
func exportedObjects(t *testing.T, yaml string) []*unstructured.Unstructured {
	t.Helper()
	file := filepath.Join(t.TempDir(), "driftless.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := kubectl(t, nil, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", file); err != nil {
		t.Fatalf("the API server refuses the exported YAML: %v\n%s", err, stderr)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(yaml), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
}
