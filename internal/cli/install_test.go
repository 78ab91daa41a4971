package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	file := filepath.Join(t.TempDir(), "driftless.yaml")
	if err := os.WriteFile(file, []byte(r.out), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := kubectl(t, nil, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", file); err != nil {
		t.Fatalf("the API server refuses the exported YAML: %v\n%s", err, stderr)
	}

	var deployment *appsv1.Deployment
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(r.out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
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
