package secrets_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/testenv"
)

const (
	AWSEntry   = secrets.AWSEntry
	GCPEntry   = secrets.GCPEntry
	AzureEntry = secrets.AzureEntry
	VaultEntry = secrets.VaultEntry
)

// awsCredentials is a sops.aws-kms entry; local-kms accepts any key.
const awsCredentials = "aws_access_key_id: AKIDLOCALKMS\naws_secret_access_key: local-kms-accepts-any-secret\n"

func TestFilesSopsEncryptedWithAWSKMSDecryptWithTheSecretsCredentials(t *testing.T) {
	kms := testenv.NewLocalKMS(t)
	// The AWS SDK's own endpoint override, in the sops CLI and here.
	t.Setenv("AWS_ENDPOINT_URL_KMS", kms.Endpoint)
	enc := testenv.SopsEncrypt(t, "secret.yaml", secretYAML,
		[]string{"AWS_ACCESS_KEY_ID=AKIDLOCALKMS", "AWS_SECRET_ACCESS_KEY=x"},
		"--kms", kms.KeyARN, "--encrypted-regex", secrets.SecretFields)
	if !strings.Contains(enc, kms.KeyARN) {
		t.Fatalf("sops did not encrypt for %s:\n%s", kms.KeyARN, enc)
	}
	keys, err := secrets.ParseKeys("Secret shop/sops-aws", map[string][]byte{"sops.aws-kms": []byte(awsCredentials)})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := keys.Decrypt("secret.yaml", []byte(enc))
	if err != nil {
		t.Fatalf("Decrypt: %v", err)
	}
	if !strings.Contains(string(plain), "password: marker-s3cr3t-value") {
		t.Errorf("Decrypt gave\n%s\nwant the value", plain)
	}
}

// encryptedFor returns a Secret manifest encrypted with SOPS whose data
// key is held only by keys of one cloud service (entry, as in sops's
// metadata): what such a file looks like, without the service. key's
// enc, when it has none, is a placeholder.
func encryptedFor(t *testing.T, entry string, key map[string]any) []byte {
	t.Helper()
	_, recipient, _ := newKey(t)
	enc := encrypt(t, "secret.yaml", secretYAML, secrets.Rule{Recipients: []string{recipient}, EncryptedRegex: secrets.SecretFields})
	return testenv.SopsFileOnlyFor(t, enc, entry, key)
}

func TestFilesForACloudKeyServiceWithoutItsCredentialsAreRefusedNamingTheEntry(t *testing.T) {
	// The Secret holds an age identity, and no credentials: no request
	// leaves the process.
	keys, _, _ := newKey(t)
	for _, tc := range []struct {
		service, entry string
		key            map[string]any
		want           string
	}{
		{"AWS KMS", "kms", map[string]any{"arn": "arn:aws:kms:eu-west-2:111122223333:key/k1"},
			"is encrypted for AWS KMS key arn:aws:kms:eu-west-2:111122223333:key/k1, and the key Secret has no sops.aws-kms entry (YAML with aws_access_key_id and aws_secret_access_key)"},
		{"GCP KMS", "gcp_kms", map[string]any{"resource_id": "projects/p/locations/global/keyRings/r/cryptoKeys/k"},
			"is encrypted for GCP KMS key projects/p/locations/global/keyRings/r/cryptoKeys/k, and the key Secret has no sops.gcp-kms entry (a service account's JSON key)"},
		{"Azure Key Vault", "azure_kv", map[string]any{"vault_url": "https://shop.vault.azure.net", "name": "sops", "version": "v1"},
			"is encrypted for Azure Key Vault key https://shop.vault.azure.net/keys/sops, and the key Secret has no sops.azure-kv entry (tenantId, clientId and clientSecret)"},
		{"Vault Transit", "hc_vault", map[string]any{"vault_address": "https://vault.example:8200", "engine_path": "transit", "key_name": "sops"},
			"is encrypted for Vault Transit key https://vault.example:8200/v1/transit/keys/sops, and the key Secret has no sops.vault-token entry (a Vault token)"},
	} {
		t.Run(tc.service, func(t *testing.T) {
			_, err := keys.Decrypt("secret.yaml", encryptedFor(t, tc.entry, tc.key))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decrypt error = %v\nwant %q", err, tc.want)
			}
		})
	}
}

func TestCredentialEntriesThatDoNotParseAreRefusedNamingTheEntryNotTheValue(t *testing.T) {
	const marker = "marker-credential-value"
	for _, tc := range []struct {
		entry, value, want string
	}{
		{"sops.aws-kms", "aws_access_key_id: " + marker + "\n", "entry sops.aws-kms is not YAML with aws_access_key_id and aws_secret_access_key"},
		{"sops.gcp-kms", "{" + marker, "entry sops.gcp-kms is not a Google service account's JSON key"},
		{"sops.azure-kv", "tenantId: " + marker + "\n", "entry sops.azure-kv: holds no Azure credentials: write tenantId, clientId and clientSecret"},
		{"sops.vault-token", " \n", "entry sops.vault-token is empty: put a Vault token in it"},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			_, err := secrets.ParseKeys("Secret shop/keys", map[string][]byte{tc.entry: []byte(tc.value)})
			if err == nil || !strings.Contains(err.Error(), "Secret shop/keys: "+tc.want) {
				t.Fatalf("ParseKeys error = %v\nwant %q", err, tc.want)
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("the error quotes the entry: %v", err)
			}
		})
	}
}

func TestCredentialEntriesInFluxsShapesAreRead(t *testing.T) {
	for _, tc := range []struct{ entry, value string }{
		{"sops.aws-kms", awsCredentials},
		{"sops.gcp-kms", `{"type": "service_account", "project_id": "p", "client_email": "sops@p.iam.gserviceaccount.com", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"}`},
		{"sops.azure-kv", "tenantId: t\nclientId: c\nclientSecret: s\n"},
		{"sops.azure-kv", `{"appId": "a", "tenant": "t", "password": "p"}`},
		{"sops.vault-token", "hvs.token\n"},
	} {
		if _, err := secrets.ParseKeys("Secret shop/keys", map[string][]byte{tc.entry: []byte(tc.value)}); err != nil {
			t.Errorf("%s %q: %v", tc.entry, tc.value, err)
		}
	}
}

// countingServer is a loopback server that counts the requests it gets
// and answers each with a redirect to redirect, when set, else 404.
func countingServer(t *testing.T, redirect string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if redirect != "" {
			http.Redirect(w, r, redirect+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// The rule for every key service (docs/secrets.md): a tenant's key
// material (its key Secret, its files' sops metadata) never makes the
// agent use an identity, a file or an address of its own. Each case is
// refused naming the entry or the address, and no request reaches the
// loopback server the key material names.
func TestKeyMaterialNeverMakesTheAgentUseAnIdentityAFileOrAnAddressOfItsOwn(t *testing.T) {
	srv, requests := countingServer(t, "")
	second, secondRequests := countingServer(t, "")
	_, port, _ := net.SplitHostPort(second.Listener.Addr().String())
	redirecting, redirected := countingServer(t, "http://localhost:"+port)
	host := srv.Listener.Addr().String()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("the agent's own ServiceAccount token"), 0o600); err != nil {
		t.Fatal(err)
	}
	external := func(source string) string {
		return `{"type": "external_account", "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/p",
			"subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": "` + srv.URL + `/token", "credential_source": ` + source + `}`
	}
	serviceAccount := `{"type": "service_account", "project_id": "p", "client_email": "sops@p.iam.gserviceaccount.com",
		"private_key": "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n", "token_uri": "` + srv.URL + `/token"}`
	gcpFile := map[string]any{"resource_id": "projects/p/locations/global/keyRings/r/cryptoKeys/k"}
	azureSecret := "tenantId: t\nclientId: c\nclientSecret: s\n"
	for _, tc := range []struct {
		name       string
		entry      string
		credential string
		sopsKey    string // the key's entry in the file's sops metadata
		key        map[string]any
		// allow, when set, restricts the addresses as
		// --tenant-source-hosts does for a tenant's Sync.
		allow string
		want  string
	}{
		{"a Google external_account reading a file of the agent's", GCPEntry, external(`{"file": "` + token + `"}`), "gcp_kms", gcpFile, "",
			"entry sops.gcp-kms holds Google credentials of type external_account: driftless reads only a service account's JSON key (type service_account"},
		{"a Google external_account reading an address of the agent's", GCPEntry, external(`{"url": "` + srv.URL + `/metadata"}`), "gcp_kms", gcpFile, "",
			"entry sops.gcp-kms holds Google credentials of type external_account"},
		{"a Google impersonated_service_account", GCPEntry, `{"type": "impersonated_service_account", "service_account_impersonation_url": "` + srv.URL + `"}`, "gcp_kms", gcpFile, "",
			"entry sops.gcp-kms holds Google credentials of type impersonated_service_account"},
		{"a Google service account's token_uri on a host not allowed", GCPEntry, serviceAccount, "gcp_kms", gcpFile, "git.example",
			"the token_uri " + srv.URL + "/token of entry sops.gcp-kms is on host " + host + ", which a Sync outside the agent's namespace may not fetch from"},
		{"an Azure clientId alone (the node's managed identity)", AzureEntry, "clientId: c\n", "azure_kv", map[string]any{"vault_url": "https://shop.vault.azure.net", "name": "sops", "version": "v1"}, "",
			"entry sops.azure-kv: holds only clientId, which would make the agent use the managed identity of its own pod or node"},
		{"an Azure Key Vault on a host not allowed", AzureEntry, azureSecret, "azure_kv", map[string]any{"vault_url": srv.URL, "name": "sops", "version": "v1"}, "git.example",
			"the Azure Key Vault address " + srv.URL + " of the file's sops metadata is on host " + host + ", which a Sync outside the agent's namespace may not fetch from"},
		{"an Azure authorityHost on a host not allowed", AzureEntry, azureSecret + "authorityHost: https://" + host + "\n", "azure_kv", map[string]any{"vault_url": "https://shop.vault.azure.net", "name": "sops", "version": "v1"}, "shop.vault.azure.net",
			"the authorityHost https://" + host + " of entry sops.azure-kv is on host " + host + ", which a Sync outside the agent's namespace may not fetch from"},
		{"a Vault address on a host not allowed", VaultEntry, "hvs.token", "hc_vault", map[string]any{"vault_address": srv.URL, "engine_path": "transit", "key_name": "sops"}, "git.example",
			"the Vault Transit address " + srv.URL + " of the file's sops metadata is on host " + host + ", which a Sync outside the agent's namespace may not fetch from"},
		{"a Vault address that is a socket of the agent's", VaultEntry, "hvs.token", "hc_vault", map[string]any{"vault_address": "unix:///var/run/vault.sock", "engine_path": "transit", "key_name": "sops"}, "",
			"the Vault Transit address unix:///var/run/vault.sock of the file's sops metadata is not an http or https address"},
		{"an AWS profile of the agent's configuration", AWSEntry, awsCredentials, "kms", map[string]any{"arn": "arn:aws:kms:eu-west-2:111122223333:key/k1", "aws_profile": "default"}, "",
			"is encrypted for AWS KMS key arn:aws:kms:eu-west-2:111122223333:key/k1: it names aws_profile default, a profile of the agent's own AWS configuration, which driftless never reads"},
		{"an AWS region that is an address", AWSEntry, awsCredentials, "kms", map[string]any{"arn": "arn:aws:kms:" + host + "/x:111122223333:key/k1"}, "",
			"its region " + host + "/x is not an AWS region"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := requests.Load()
			keys, err := secrets.ParseKeys("Secret shop/keys", map[string][]byte{tc.entry: []byte(tc.credential)})
			if err == nil {
				if tc.allow != "" {
					hosts, herr := source.ParseHosts([]string{tc.allow})
					if herr != nil {
						t.Fatal(herr)
					}
					keys.LimitAddresses(hosts.CheckURL)
				}
				_, err = keys.Decrypt("secret.yaml", encryptedFor(t, tc.sopsKey, tc.key))
			}
			if got := requests.Load() - before; got != 0 {
				t.Errorf("%d requests reached the loopback server the key material names", got)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant %q", err, tc.want)
			}
		})
	}

	t.Run("a redirect of an allowed Vault to a host not allowed", func(t *testing.T) {
		keys, err := secrets.ParseKeys("Secret shop/keys", map[string][]byte{VaultEntry: []byte("hvs.token")})
		if err != nil {
			t.Fatal(err)
		}
		hosts, _ := source.ParseHosts([]string{"127.0.0.1"})
		keys.LimitAddresses(hosts.CheckURL)
		_, err = keys.Decrypt("secret.yaml", encryptedFor(t, "hc_vault", map[string]any{"vault_address": redirecting.URL, "engine_path": "transit", "key_name": "sops"}))
		if redirected.Load() == 0 {
			t.Fatal("the allowed Vault got no request: the test proves nothing")
		}
		if n := secondRequests.Load(); n != 0 {
			t.Errorf("%d requests followed the redirect to localhost, which the allow-list does not list", n)
		}
		if err == nil || !strings.Contains(err.Error(), "is on host localhost:"+port) {
			t.Fatalf("error = %v, want it to name the host the redirect went to", err)
		}
	})
}
