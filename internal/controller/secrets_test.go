package controller

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/secrets"
)

// leakMarker is the secret value no log, event, status or file may show.
const leakMarker = "leak-marker-7f3a9c"

// sopsIdentity makes an age identity, the key Secret holding it in ns,
// and a function encrypting files for it.
func sopsIdentity(t *testing.T, ns, secret string) func(name, plain, regex string) string {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns},
		Data:       map[string][]byte{"identity.agekey": []byte(id.String() + "\n")},
	}); err != nil {
		t.Fatal(err)
	}
	return func(name, plain, regex string) string {
		enc, err := secrets.Encrypt(name, []byte(plain), secrets.Rule{Recipients: []string{id.Recipient().String()}, EncryptedRegex: regex})
		if err != nil {
			t.Fatal(err)
		}
		return string(enc)
	}
}

// logLines collects every line a logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestDecryptedValuesAreAppliedButNeverShown(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	encrypt := sopsIdentity(t, h.ns, "sops-age")
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + leakMarker + "\n"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  token: " + leakMarker + "\n"
	rev := h.repo.Commit(t, "encrypted", map[string]string{
		"apps/db.yaml":       encrypt("db.yaml", secret, secrets.SecretFields),
		"apps/settings.yaml": encrypt("settings.yaml", cm, "^data$"),
		"apps/plain.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  a: b\n",
	})
	h.createSync("shop", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"apps"}
		s.Spec.Interval = metav1.Duration{Duration: time.Hour}
		s.Spec.Decryption = &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-age"}}
	})
	var logs logLines
	cacheDir := t.TempDir()
	startLoggedAgent(t, cacheDir, &logs)
	h.waitReady("shop", rev)

	// Applied decrypted.
	var db corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "db"}, &db); err != nil {
		t.Fatal(err)
	}
	if string(db.Data["password"]) != leakMarker {
		t.Fatalf("Secret db has password %q, want the decrypted value", db.Data["password"])
	}

	// A drift on the decrypted ConfigMap is reverted, masked.
	settings := get(t, "v1", "ConfigMap", h.ns, "settings")
	_ = unstructured.SetNestedField(settings.Object, leakMarker+"-edited", "data", "token")
	if err := c.Update(ctx, settings, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ConfigMap reverted, with a masked Event", func() bool {
		got := get(t, "v1", "ConfigMap", h.ns, "settings")
		v, _, _ := unstructured.NestedString(got.Object, "data", "token")
		for _, n := range objectEvents(t, h.ns, "ConfigMap", "settings") {
			if strings.Contains(n, "reverted data.token: ***-edited → ***") && v == leakMarker {
				return true
			}
		}
		return false
	})
	// And on the decrypted Secret.
	if err := c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "db"}, &db); err != nil {
		t.Fatal(err)
	}
	db.Data["password"] = []byte(leakMarker + "-edited")
	if err := c.Update(ctx, &db, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Secret reverted", func() bool {
		var got corev1.Secret
		_ = c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "db"}, &got)
		return string(got.Data["password"]) == leakMarker && len(objectEvents(t, h.ns, "Secret", "db")) > 0
	})

	// A tampered file fails the sync, naming the file; nothing of it is applied.
	tampered := strings.Replace(encrypt("db.yaml", secret, secrets.SecretFields), "name: db", "name: db2", 1)
	h.repo.Commit(t, "tampered", map[string]string{"apps/db.yaml": tampered, "apps/new.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n"})
	h.requestSync("shop")
	eventually(t, "the tampered revision refused", func() bool {
		c := ready(h.syncNow("shop"))
		return c != nil && c.Reason == v1alpha1.ReasonBuildFailed && strings.Contains(c.Message, "apps/db.yaml: failed its integrity check (MAC mismatch)")
	})
	if get(t, "v1", "ConfigMap", h.ns, "new") != nil {
		t.Error("ConfigMap new of the tampered revision was applied")
	}

	// Nowhere shown: logs, events, the Sync's status, the cache directory.
	for _, line := range logs.all() {
		if strings.Contains(line, leakMarker) {
			t.Errorf("a log line shows the value: %s", line)
		}
	}
	if len(logs.all()) == 0 {
		t.Error("no log line captured: the leak check of the logs checked nothing")
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message+e.Reason+e.Action, leakMarker) {
			t.Errorf("an Event shows the value: %s", e.Message)
		}
	}
	status, _ := json.Marshal(h.syncNow("shop"))
	if strings.Contains(string(status), leakMarker) {
		t.Errorf("the Sync shows the value:\n%s", status)
	}
	files := 0
	_ = filepath.WalkDir(cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		if data, _ := os.ReadFile(p); strings.Contains(string(data), leakMarker) {
			t.Errorf("cache file %s holds the value", p)
		}
		return nil
	})
	if files == 0 {
		t.Error("the cache directory is empty: the leak check of the cache checked nothing")
	}
}

func TestSyncWithoutUsableKeysFailsNamingWhatIsWrong(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	encrypt := sopsIdentity(t, h.ns, "sops-age")
	h.repo.Commit(t, "encrypted", map[string]string{
		"apps/db.yaml": encrypt("db.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+leakMarker+"\n", secrets.SecretFields),
	})
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "no-keys", Namespace: h.ns}, Data: map[string][]byte{"identity": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })
	for _, tc := range []struct {
		name       string
		decryption *v1alpha1.Decryption
		want       string
	}{
		{"no spec.decryption", nil, "apps/db.yaml: is encrypted with SOPS, and the Sync sets no spec.decryption"},
		{"a missing key Secret", &v1alpha1.Decryption{SecretRef: &v1alpha1.LocalObjectReference{Name: "gone"}}, "key Secret " + h.ns + "/gone of spec.decryption.secretRef does not exist"},
		{"a key Secret without age identities", &v1alpha1.Decryption{SecretRef: &v1alpha1.LocalObjectReference{Name: "no-keys"}}, "Secret " + h.ns + "/no-keys of spec.decryption.secretRef holds no decryption key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := h.syncNow("shop")
			s.Spec.Decryption = tc.decryption
			if err := c.Update(ctx, s); err != nil {
				t.Fatal(err)
			}
			h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonBuildFailed, tc.want)
			if get(t, "v1", "Secret", h.ns, "db") != nil {
				t.Error("Secret db applied")
			}
		})
	}
}

// startLoggedAgent starts the agent's controllers with their log lines
// collected in logs and their checkouts in cacheDir. It logs at V(1),
// above the agent's info level: client-go logs whole request bodies at
// V(8), which the agent never enables. Built here, not with agenttest, as
// startAgentWith is (internal/agent imports this package).
func startLoggedAgent(t *testing.T, cacheDir string, logs *logLines) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     scheme,
		Cache:      CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     funcr.New(logs.add, funcr.Options{Verbosity: 1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.CacheDir, opts.Concurrency = cacheDir, 1
	if _, err := Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// requestSync annotates the Sync to be synced now, as driftless reconcile does.
func (h *harness) requestSync(name string) {
	h.t.Helper()
	s := h.syncNow(name)
	patch := client.MergeFrom(s.DeepCopy())
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[v1alpha1.RequestedAtAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	if err := c.Patch(context.Background(), s, patch); err != nil {
		h.t.Fatal(err)
	}
}
