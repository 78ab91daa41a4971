package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fage "filippo.io/age"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/redact/redacttest"
	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
)

// The leak test: 20 Secret values (redacttest.Values: quotes,
// backslashes, newlines, unicode, a 4 KiB PEM block, JSON, a number…),
// from a substituteFrom Secret and from a SOPS file, are put in
// annotations, env values and data that the API server takes, and in
// labels it refuses (quoting them with %q in its error). The agent runs
// as in production (tenancy on: the Syncs act as their ServiceAccount)
// with drift watches, notifications and commit statuses to loopback
// receivers, and a hand edit is reverted. Then every output a user or a
// log sees — status and history, Events, the agent's log, notification
// and commit-status payloads, metrics, and diff, build, explain, history
// and events — is searched for every 8-character cut of every value in
// every encoding (redacttest): there must be none.
func TestNoSecretValueLeaksIntoAnyOutput(t *testing.T) {
	ctx := context.Background()
	values := redacttest.Values()
	agentNS := env.Namespace(t)
	ns := env.Namespace(t)

	// The tenant's ServiceAccount, admin of its namespace only (a Role:
	// the aggregated ClusterRole admin is empty without a controller-manager).
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "syncer"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "syncer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "syncer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa.Name}}}
	vars := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vars"}, Data: map[string][]byte{}}
	for i, v := range values {
		vars.Data[fmt.Sprintf("v%d", i)] = []byte(v)
	}
	id, err := fage.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sops-key"},
		Data: map[string][]byte{"age.agekey": []byte(id.String())}}
	for _, obj := range []client.Object{sa, role, binding, vars, key} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	// The repository: per Sync, what the API server takes and what it
	// refuses, from variables and from SOPS.
	quoted := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	var annotations, labels, envs, sopsAnnotations, sopsLabels strings.Builder
	for i, v := range values {
		fmt.Fprintf(&annotations, "    a%d: \"x-${v%d}\"\n", i, i)
		fmt.Fprintf(&labels, "    l%d: \"${v%d}\"\n", i, i)
		fmt.Fprintf(&envs, "        - name: E%d\n          value: \"x-${v%d}\"\n", i, i)
		fmt.Fprintf(&sopsAnnotations, "    s%d: %s\n", i, quoted("x-"+v))
		fmt.Fprintf(&sopsLabels, "    s%d: %s\n", i, quoted(v))
	}
	encrypt := func(name, plain string) string {
		out, err := secrets.Encrypt(name, []byte(plain), secrets.Rule{Recipients: []string{id.Recipient().String()}})
		if err != nil {
			t.Fatalf("encrypt %s: %v", name, err)
		}
		return string(out)
	}
	configMap := func(name, field, body string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  %s:\n%s", name, ns, field, body)
	}
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "apps", map[string]string{
		"good/vars.yaml":    configMap("vars-good", "annotations", annotations.String()),
		"good/web.yaml":     fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: %s\nspec:\n  replicas: 0\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: example.com/web:1\n        env:\n%s", ns, envs.String()),
		"good/sops.yaml":    encrypt("sops.yaml", configMap("sops-good", "annotations", sopsAnnotations.String())),
		"badvars/vars.yaml": configMap("vars-bad", "labels", labels.String()),
		"badsops/sops.yaml": encrypt("sops.yaml", configMap("sops-bad", "labels", sopsLabels.String())),
	})

	// Loopback receivers: a generic webhook and a Gitea forge.
	var received syncBuffer
	receiver := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(&received, "%s %s\n%s\n", r.Method, r.URL.Path, body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("{}"))
	}
	hook := httptest.NewServer(http.HandlerFunc(receiver))
	t.Cleanup(hook.Close)
	forge := httptest.NewServer(http.HandlerFunc(receiver))
	t.Cleanup(forge.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("forge-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("targets:\n- name: hook\n  type: generic\n  url: %s/hook\n- name: forge\n  type: gitea-status\n  address: %s/api/v1\n  tokenFile: %s\ndriftWindow: 1s\n",
		hook.URL, forge.URL, filepath.Join(dir, "token"))
	if err := os.WriteFile(filepath.Join(dir, "notify.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	var agentLog syncBuffer
	a := startAgentLogging(t, &agentLog,
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", agentNS,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
		"--log-format", "json",
		"--notify-config", filepath.Join(dir, "notify.yaml"),
		"--cache-dir", t.TempDir(),
	)
	newSync := func(name, path string) *v1alpha1.Sync {
		return &v1alpha1.Sync{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Annotations: map[string]string{"driftless.dev/commit-status-repository": "org/fleet"}},
			Spec: v1alpha1.SyncSpec{
				Source:             v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.HTTPURL(), Branch: "main"}},
				Paths:              []string{path},
				Interval:           metav1.Duration{Duration: time.Hour},
				ServiceAccountName: sa.Name,
				SubstituteFrom:     []v1alpha1.SubstituteReference{{Kind: "Secret", Name: vars.Name}},
				Decryption:         &v1alpha1.Decryption{SecretRef: &v1alpha1.LocalObjectReference{Name: key.Name}},
			},
		}
	}
	names := []string{"good", "badvars", "badsops"}
	for _, name := range names {
		// The agent installs the Sync CRD as it starts.
		a.Eventually("Sync "+name+" is created", func() string {
			if err := c.Create(ctx, newSync(name, name)); err != nil && !apierrors.IsAlreadyExists(err) {
				return err.Error()
			}
			return ""
		})
	}
	readyIs := func(name string, want metav1.ConditionStatus) func() string {
		return func() string {
			var s v1alpha1.Sync
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
				return err.Error()
			}
			ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != want {
				return fmt.Sprintf("Sync %s: Ready = %+v, want %s", name, ready, want)
			}
			return ""
		}
	}
	a.Eventually("the good Sync is Ready", readyIs("good", metav1.ConditionTrue))
	a.Eventually("the Sync of refused labels from variables fails", readyIs("badvars", metav1.ConditionFalse))
	a.Eventually("the Sync of refused labels from SOPS fails", readyIs("badsops", metav1.ConditionFalse))

	// A hand edit of an annotation that holds a value: reverted, with an
	// incident naming the field.
	for _, name := range []string{"vars-good", "sops-good"} {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
				return err
			}
			for k := range cm.Annotations {
				if strings.HasPrefix(k, "a") || strings.HasPrefix(k, "s") {
					cm.Annotations[k] = "edited by hand"
				}
			}
			return c.Update(ctx, &cm, client.FieldOwner("kubectl-edit"))
		})
		if err != nil {
			t.Fatalf("edit %s: %v", name, err)
		}
	}
	a.Eventually("both hand edits are reverted and recorded", func() string {
		var s v1alpha1.Sync
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "good"}, &s); err != nil {
			return err.Error()
		}
		if n := len(s.Status.Drift); n < 2 {
			return fmt.Sprintf("%d drift incidents, want 2", n)
		}
		return ""
	})
	a.Eventually("a failure is notified and a commit status posted", func() string {
		got := received.String()
		if !strings.Contains(got, "/hook") || !strings.Contains(got, "/statuses/") {
			return "received: " + got
		}
		return ""
	})

	// What users and logs see.
	outputs := map[string]string{}
	for _, name := range names {
		var s v1alpha1.Sync
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		status, _ := yaml.Marshal(s.Status)
		outputs["status of "+name] = string(status)
		outputs["status of "+name+" (json)"] = mustJSON(s.Status)
		outputs["history "+name] = cliOutput(t, "history", "--kubeconfig", env.ControlPlane.KubeconfigPath(), ns+"/"+name, "-o", "yaml")
		outputs["events "+name] = cliOutput(t, "events", "--kubeconfig", env.ControlPlane.KubeconfigPath(), ns+"/"+name)
		outputs["diff "+name] = cliOutput(t, "diff", "--kubeconfig", env.ControlPlane.KubeconfigPath(), "--sync", ns+"/"+name)
	}
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	outputs["Events"] = mustJSON(events)
	checkout := t.TempDir()
	if out, err := exec.Command("git", "clone", "-q", repo.Bare, checkout).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v: %s", err, out)
	}
	for _, name := range names {
		outputs["build "+name] = cliOutput(t, "build", "--kubeconfig", env.ControlPlane.KubeconfigPath(), "--repo", checkout, "--sync", ns+"/"+name)
	}
	for _, obj := range []string{"configmap/vars-good", "configmap/sops-good", "deployment/web"} {
		outputs["explain "+obj] = cliOutput(t, "explain", "--kubeconfig", env.ControlPlane.KubeconfigPath(), "-n", ns, obj)
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	for _, f := range families {
		_, _ = expfmt.MetricFamilyToText(&metrics, f)
	}
	outputs["metrics"] = metrics.String()
	outputs["notifications and commit statuses"] = received.String()
	outputs["agent log"] = agentLog.String()

	checks, hits := 0, 0
	for name, text := range outputs {
		if text == "" {
			t.Errorf("%s: empty output", name)
		}
		found, n := redacttest.Find(text, values)
		checks += n
		hits += len(found)
		for _, h := range found {
			t.Errorf("%s: value %d (%.24q…) in %s form: %q", name, h.Value, values[h.Value], h.Encoding, h.Cut)
		}
	}
	t.Logf("%d values × %d encodings × %d outputs = %d checks, %d hits", len(values), len(redacttest.Encodings), len(outputs), checks, hits)
	if err := a.Stop(); err != nil {
		t.Errorf("the agent did not shut down cleanly: %v", err)
	}
}

// cliOutput runs a driftless command and returns all it printed.
func cliOutput(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, args...)
	return r.out + r.errOut
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
