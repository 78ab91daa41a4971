package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/azkv"
	"github.com/getsops/sops/v3/gcpkms"
	"github.com/getsops/sops/v3/hcvault"
	"github.com/getsops/sops/v3/kms"
	"sigs.k8s.io/yaml"
)

// cloudTimeout bounds each request to a cloud key service.
const cloudTimeout = 30 * time.Second

// cloudCredentials are a key Secret's credentials for the cloud key
// services; a nil or empty one is absent. They come only from the key
// Secret: the agent's own cloud identity (environment, instance
// metadata, workload identity) is never used for a Sync's files, so that
// a Sync cannot decrypt what only the agent may.
type cloudCredentials struct {
	aws   aws.CredentialsProvider
	gcp   []byte // a service account's JSON key
	azure azcore.TokenCredential
	vault string // a token
}

func isCloudEntry(name string) bool {
	switch name {
	case AWSEntry, GCPEntry, AzureEntry, VaultEntry:
		return true
	}
	return false
}

// add reads the credentials of the entry name. Errors name the entry and
// the fields it lacks, never a value.
func (c *cloudCredentials) add(name string, data []byte) error {
	switch name {
	case AWSEntry:
		var v struct {
			AccessKeyID     string `json:"aws_access_key_id"`
			SecretAccessKey string `json:"aws_secret_access_key"`
			SessionToken    string `json:"aws_session_token"`
		}
		if err := yaml.Unmarshal(data, &v); err != nil || v.AccessKeyID == "" || v.SecretAccessKey == "" {
			return fmt.Errorf("entry %s is not YAML with aws_access_key_id and aws_secret_access_key (and optionally aws_session_token)", name)
		}
		c.aws = credentials.NewStaticCredentialsProvider(v.AccessKeyID, v.SecretAccessKey, v.SessionToken)
	case GCPEntry:
		var v struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(data, &v); err != nil || v.Type == "" {
			return fmt.Errorf("entry %s is not a Google service account's JSON key (gcloud iam service-accounts keys create writes one)", name)
		}
		c.gcp = data
	case AzureEntry:
		cred, err := azureCredential(data)
		if err != nil {
			return fmt.Errorf("entry %s: %w", name, err)
		}
		c.azure = cred
	case VaultEntry:
		token := strings.TrimSpace(string(data))
		if token == "" {
			return fmt.Errorf("entry %s is empty: put a Vault token in it", name)
		}
		c.vault = token
	}
	return nil
}

// azureConfig is the sops.azure-kv entry, in the fields Flux reads.
type azureConfig struct {
	TenantID                  string `json:"tenantId"`
	ClientID                  string `json:"clientId"`
	ClientSecret              string `json:"clientSecret"`
	ClientCertificate         string `json:"clientCertificate"`
	ClientCertificatePassword string `json:"clientCertificatePassword"`
	AuthorityHost             string `json:"authorityHost"`
	// As az ad sp create-for-rbac prints them.
	AppID    string `json:"appId"`
	Tenant   string `json:"tenant"`
	Password string `json:"password"`
}

func azureCredential(data []byte) (azcore.TokenCredential, error) {
	var c azureConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("is not YAML or JSON")
	}
	opts := azcore.ClientOptions{Cloud: cloud.AzurePublic}
	if c.AuthorityHost != "" {
		opts.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: c.AuthorityHost, Services: map[cloud.ServiceName]cloud.ServiceConfiguration{}}
	}
	switch {
	case c.TenantID != "" && c.ClientID != "" && c.ClientSecret != "":
		return azidentity.NewClientSecretCredential(c.TenantID, c.ClientID, c.ClientSecret, &azidentity.ClientSecretCredentialOptions{ClientOptions: opts})
	case c.TenantID != "" && c.ClientID != "" && c.ClientCertificate != "":
		certs, key, err := azidentity.ParseCertificates([]byte(c.ClientCertificate), []byte(c.ClientCertificatePassword))
		if err != nil {
			return nil, fmt.Errorf("clientCertificate is not a PEM or PKCS#12 certificate with its key: %w", errNoDetail)
		}
		return azidentity.NewClientCertificateCredential(c.TenantID, c.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{ClientOptions: opts})
	case c.Tenant != "" && c.AppID != "" && c.Password != "":
		return azidentity.NewClientSecretCredential(c.Tenant, c.AppID, c.Password, &azidentity.ClientSecretCredentialOptions{ClientOptions: opts})
	case c.ClientID != "" && c.TenantID == "":
		return azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ID: azidentity.ClientID(c.ClientID)})
	}
	return nil, fmt.Errorf("holds no Azure credentials: write tenantId, clientId and clientSecret (or clientCertificate), or appId, tenant and password, or only clientId for a managed identity")
}

// dataKey decrypts the data key with a cloud key service of the group
// that c has credentials for. Otherwise it returns, for each cloud key
// of the group, why it did not decrypt it: no credentials (the entry to
// add), or the service's answer.
func (c cloudCredentials) dataKey(group sops.KeyGroup) ([]byte, []string) {
	var why []string
	for _, mk := range group {
		var (
			service, id, entry, fields string
			decrypt                    func(context.Context) ([]byte, error)
		)
		switch key := mk.(type) {
		case *kms.MasterKey:
			service, id, entry, fields = "AWS KMS", key.Arn, AWSEntry, "YAML with aws_access_key_id and aws_secret_access_key"
			if c.aws != nil {
				kms.NewCredentialsProvider(c.aws).ApplyToMasterKey(key)
				decrypt = key.DecryptContext
			}
		case *gcpkms.MasterKey:
			service, id, entry, fields = "GCP KMS", key.ResourceID, GCPEntry, "a service account's JSON key"
			if c.gcp != nil {
				gcpkms.CredentialJSON(c.gcp).ApplyToMasterKey(key)
				decrypt = key.DecryptContext
			}
		case *azkv.MasterKey:
			service, id, entry, fields = "Azure Key Vault", key.VaultURL+"/keys/"+key.Name, AzureEntry, "tenantId, clientId and clientSecret"
			if c.azure != nil {
				azkv.NewTokenCredential(c.azure).ApplyToMasterKey(key)
				decrypt = key.DecryptContext
			}
		case *hcvault.MasterKey:
			service, id, entry, fields = "Vault Transit", key.VaultAddress+"/v1/"+key.EnginePath+"/keys/"+key.KeyName, VaultEntry, "a Vault token"
			if c.vault != "" {
				hcvault.Token(c.vault).ApplyToMasterKey(key)
				decrypt = key.DecryptContext
			}
		default:
			continue
		}
		if decrypt == nil {
			why = append(why, fmt.Sprintf("is encrypted for %s key %s, and the key Secret has no %s entry (%s)", service, id, entry, fields))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), cloudTimeout)
		key, err := decrypt(ctx)
		cancel()
		if err == nil && len(key) == 32 {
			return key, nil
		}
		if err == nil {
			err = fmt.Errorf("it returned a data key of %d bytes, not 32", len(key))
		}
		why = append(why, fmt.Sprintf("%s key %s did not decrypt it with the credentials of %s: %v", service, id, entry, err))
	}
	return nil, why
}
