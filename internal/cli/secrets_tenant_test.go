package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fage "filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
)

// A tenant may create Syncs and Secrets in its namespace, and commit what
// it likes. Through the real agent (its own ServiceAccount and the
// shipped RBAC, tenancy on, --tenant-source-hosts listing only the git
// server's host), its key material cannot make the agent use anything of
// its own: a Google external_account entry whose token_url and
// credential_source.url point at a loopback server (which would get the
// agent's token), an Azure entry with only clientId (the node's managed
// identity), and a file whose Vault address is a loopback server not
// listed. Each Sync fails naming the entry or address, no request
// reaches either server, and nothing of the revision is written. A file
// whose PGP data key is a compressed 64 MiB message fails its Sync naming
// the file, and the agent stays up: another Sync applies a commit made
// after it.
func TestATenantsKeyMaterialReachesNothingOfTheAgentsAndABombStopsOnlyItsSync(t *testing.T) {
	ctx := context.Background()
	agentNS, ns := env.Namespace(t), env.Namespace(t)
	agentCfg := agentIdentityIn(t, agentNS)
	tenantIn(t, c, ns, "tenant", true)

	tokenServer, tokenRequests := refusingServer(t)
	vaultServer, vaultRequests := refusingServer(t)
	_, vaultPort, _ := net.SplitHostPort(vaultServer.Listener.Addr().String())
	vaultURL := "http://localhost:" + vaultPort // the git server is 127.0.0.1

	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	gitURL, err := url.Parse(repo.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	id, err := fage.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	// sealed is a Secret manifest encrypted for one key of a key
	// service (entry, key: as in sops's metadata).
	sealed := func(name, entry string, key map[string]any) string {
		plain := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s-db\n  namespace: %s\nstringData:\n  password: p\n", name, ns)
		enc, err := secrets.Encrypt("db.yaml", []byte(plain), secrets.Rule{Recipients: []string{id.Recipient().String()}, EncryptedRegex: secrets.SecretFields})
		if err != nil {
			t.Fatal(err)
		}
		return string(testenv.SopsFileOnlyFor(t, enc, entry, key))
	}
	bomb := testenv.NewCompressingPGPKey(t)
	files := map[string]string{"apps/web/config.yaml": agenttest.ConfigMap(ns, "web-config", "v1")}
	for name, file := range map[string]string{
		"gcp":   sealed("gcp", "gcp_kms", map[string]any{"resource_id": "projects/p/locations/global/keyRings/r/cryptoKeys/k"}),
		"azure": sealed("azure", "azure_kv", map[string]any{"vault_url": "https://shop.vault.azure.net", "name": "sops", "version": "v1"}),
		"vault": sealed("vault", "hc_vault", map[string]any{"vault_address": vaultURL, "engine_path": "transit", "key_name": "sops"}),
		"bomb":  sealed("bomb", "pgp", map[string]any{"fp": bomb.Fingerprint, "enc": testenv.PGPMessage(t, bomb, 64<<20)}),
	} {
		files["apps/"+name+"/db.yaml"] = file
		files["apps/"+name+"/new.yaml"] = agenttest.ConfigMap(ns, name+"-new", "v1")
	}
	first := repo.Commit(t, "the tenant's apps", files)

	external := `{"type": "external_account", "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/p",
		"subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": "` + tokenServer.URL + `/token",
		"credential_source": {"url": "` + tokenServer.URL + `/computeMetadata/v1/instance/service-accounts/default/identity"}}`
	for name, entries := range map[string]map[string][]byte{
		"gcp":   {secrets.GCPEntry: []byte(external)},
		"azure": {secrets.AzureEntry: []byte("clientId: 00000000-0000-0000-0000-000000000000\n")},
		"vault": {secrets.VaultEntry: []byte("hvs.tenant-token")},
		"bomb":  {"bomb.asc": []byte(bomb.ArmoredPrivate)},
	} {
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-keys"}, Data: entries})
	}

	o := agenttest.Options(t, agentCfg, agentNS)
	o.TenantSourceHosts = []string{gitURL.Hostname()}
	a := agenttest.Start(t, o)
	var syncs []*v1alpha1.Sync
	for _, name := range []string{"gcp", "azure", "vault", "bomb", "web"} {
		s := &v1alpha1.Sync{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.SyncSpec{
				Source:             v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.HTTPURL(), Branch: "main"}},
				Paths:              []string{"apps/" + name},
				Interval:           metav1.Duration{Duration: 2 * time.Second},
				ServiceAccountName: "tenant",
			},
		}
		if name != "web" {
			s.Spec.Decryption = &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: name + "-keys"}}
		}
		syncs = append(syncs, s)
	}
	createSyncs(a, syncs...)

	for name, want := range map[string]string{
		"gcp":   "entry sops.gcp-kms holds Google credentials of type external_account: driftless reads only a service account's JSON key",
		"azure": "entry sops.azure-kv: holds only clientId, which would make the agent use the managed identity of its own pod or node",
		"vault": "the Vault Transit address " + vaultURL + " of the file's sops metadata is on host localhost:" + vaultPort + ", which a Sync outside the agent's namespace may not fetch from",
		"bomb":  "apps/bomb/db.yaml: is encrypted for PGP key " + bomb.Fingerprint + " with a data key longer than 64 bytes",
	} {
		a.Eventually("Sync "+name+" fails naming what it refused", syncFailsWith(client.ObjectKey{Namespace: ns, Name: name}, want))
	}
	web := client.ObjectKey{Namespace: ns, Name: "web"}
	a.Eventually("Sync web applies the first commit", agenttest.AppliedAt(c, web, first))
	second := repo.Commit(t, "web v2, after the bomb", map[string]string{"apps/web/config.yaml": agenttest.ConfigMap(ns, "web-config", "v2")})
	a.Eventually("Sync web applies a commit made after the bomb", agenttest.AppliedAt(c, web, second))
	if got := agenttest.Greeting(t, c, ns, "web-config"); got != "v2" {
		t.Errorf("web-config's greeting = %q, want v2", got)
	}

	if n := tokenRequests.Load(); n != 0 {
		t.Errorf("%d requests reached the token server an external_account entry names", n)
	}
	if n := vaultRequests.Load(); n != 0 {
		t.Errorf("%d requests reached the Vault a file names, on a host --tenant-source-hosts does not list", n)
	}
	for _, name := range []string{"gcp", "azure", "vault", "bomb"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-new"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s-new of the refused revision: %v, want it not to exist", name, err)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-db"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s-db of the refused revision: %v, want it not to exist", name, err)
		}
	}
}

// refusingServer is a loopback server that counts the requests it gets
// and refuses each.
func refusingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, "no", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// syncFailsWith checks that the Sync is Ready=False with a message
// containing want.
func syncFailsWith(key client.ObjectKey, want string) func() string {
	return func() string {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), key, &s); err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, want) {
			return fmt.Sprintf("Sync %s: Ready = %+v, want False saying %q", key, ready, want)
		}
		return ""
	}
}
