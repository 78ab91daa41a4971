package secrets_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
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
	var doc map[string]any
	if err := yaml.Unmarshal(enc, &doc); err != nil {
		t.Fatal(err)
	}
	md := doc["sops"].(map[string]any)
	delete(md, "age")
	key["created_at"] = "2026-01-01T00:00:00Z"
	if key["enc"] == nil {
		key["enc"] = "c29tZSBlbmNyeXB0ZWQgZGF0YSBrZXk="
	}
	md[entry] = []any{key}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
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
		{"sops.gcp-kms", `{"type": "service_account", "project_id": "p"}`},
		{"sops.azure-kv", "tenantId: t\nclientId: c\nclientSecret: s\n"},
		{"sops.azure-kv", `{"appId": "a", "tenant": "t", "password": "p"}`},
		{"sops.azure-kv", "clientId: managed-identity\n"},
		{"sops.vault-token", "hvs.token\n"},
	} {
		if _, err := secrets.ParseKeys("Secret shop/keys", map[string][]byte{tc.entry: []byte(tc.value)}); err != nil {
			t.Errorf("%s %q: %v", tc.entry, tc.value, err)
		}
	}
}
