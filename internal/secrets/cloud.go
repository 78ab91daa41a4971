package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/azkv"
	"github.com/getsops/sops/v3/gcpkms"
	"github.com/getsops/sops/v3/hcvault"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/kms"
	vaultapi "github.com/hashicorp/vault/api"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/jwt"
	"sigs.k8s.io/yaml"
)

// cloudTimeout bounds each request to a cloud key service.
const cloudTimeout = 30 * time.Second

// cloudCredentials are a key Secret's credentials for the cloud key
// services; a nil or empty one is absent. They come only from the key
// Secret: the agent's own cloud identity (environment, instance
// metadata, workload identity, its files and profiles) is never used for
// a Sync's files, so that a Sync cannot decrypt what only the agent may,
// nor send what the agent holds anywhere.
type cloudCredentials struct {
	aws aws.CredentialsProvider
	// gcp is a service account's key; gcpTokenURL its token_uri.
	gcp         *jwt.Config
	gcpTokenURL string
	azure       azcore.TokenCredential
	// azureAuthority is the entry's authorityHost, when it sets one.
	azureAuthority string
	vault          string // a token
	// check, when set, refuses the addresses a Sync may not reach
	// (see Keys.LimitAddresses).
	check func(what, address string) error
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
		return c.addGCP(name, data)
	case AzureEntry:
		cred, authority, err := azureCredential(data, c.client())
		if err != nil {
			return fmt.Errorf("entry %s: %w", name, err)
		}
		c.azure, c.azureAuthority = cred, authority
	case VaultEntry:
		token := strings.TrimSpace(string(data))
		if token == "" {
			return fmt.Errorf("entry %s is empty: put a Vault token in it", name)
		}
		c.vault = token
	}
	return nil
}

// gcpScope is the OAuth scope of Cloud KMS.
const gcpScope = "https://www.googleapis.com/auth/cloudkms"

// addGCP reads a service account's JSON key. Every other type of Google
// credentials is refused: an external_account makes its holder read a
// file or an address (credential_source) and post what it got to its
// token_url, which for the agent would send its own ServiceAccount token
// or instance identity wherever the entry says.
func (c *cloudCredentials) addGCP(name string, data []byte) error {
	var v struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
		TokenURI    string `json:"token_uri"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Type == "" {
		return fmt.Errorf("entry %s is not a Google service account's JSON key (gcloud iam service-accounts keys create writes one)", name)
	}
	if v.Type != "service_account" {
		return fmt.Errorf("entry %s holds Google credentials of type %s: driftless reads only a service account's JSON key (type service_account; gcloud iam service-accounts keys create writes one), "+
			"since other types make the agent read files or addresses of its own and send what it read", name, v.Type)
	}
	if v.ClientEmail == "" || v.PrivateKey == "" {
		return fmt.Errorf("entry %s is a Google service account's JSON key without client_email and private_key: put the whole key in it, as gcloud iam service-accounts keys create writes it", name)
	}
	conf, err := google.JWTConfigFromJSON(data, gcpScope)
	if err != nil {
		return fmt.Errorf("entry %s is not a Google service account's JSON key: %w", name, errNoDetail)
	}
	c.gcp, c.gcpTokenURL = conf, v.TokenURI
	return nil
}

// allowed returns an error when the agent may not send a request to
// address: it is not http or https, or c.check refuses it. what names the
// address in the error.
func (c *cloudCredentials) allowed(what, address string) error {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s is not an http or https address", what)
	}
	if c.check == nil {
		return nil
	}
	return c.check(what, address)
}

// client returns the HTTP client of the requests to addresses a Sync's
// key material names: each request, a redirect's included, goes only
// where c.allowed lets it.
func (c *cloudCredentials) client() *http.Client {
	return &http.Client{Transport: guarded{c: c, next: http.DefaultTransport}, Timeout: cloudTimeout}
}

// vaultClient is the Vault API's default HTTP client, with the agent's
// TLS settings (VAULT_CACERT, VAULT_SKIP_VERIFY …) as sops has them, whose
// requests go only where c.allowed lets them: the Vault client follows a
// redirect itself, through it.
func (c *cloudCredentials) vaultClient() *http.Client {
	hc := vaultapi.DefaultConfig().HttpClient
	hc.Transport = guarded{c: c, next: hc.Transport}
	return hc
}

// guarded refuses a request c.allowed refuses, before it is sent.
type guarded struct {
	c    *cloudCredentials
	next http.RoundTripper
}

func (g guarded) RoundTrip(req *http.Request) (*http.Response, error) {
	u := *req.URL
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	if err := g.c.allowed("the key service address "+u.String(), u.String()); err != nil {
		return nil, err
	}
	return g.next.RoundTrip(req)
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

// azureCredential returns the service principal's credential of an
// sops.azure-kv entry, which requests its tokens with hc, and the
// entry's authorityHost. Its error completes "entry sops.azure-kv …".
// An entry with only clientId is refused: it would make the agent use
// the managed identity of its own pod or node.
func azureCredential(data []byte, hc *http.Client) (azcore.TokenCredential, string, error) {
	var c azureConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, "", fmt.Errorf("is not YAML or JSON")
	}
	opts := azcore.ClientOptions{Cloud: cloud.AzurePublic, Transport: hc}
	if c.AuthorityHost != "" {
		opts.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: c.AuthorityHost, Services: map[cloud.ServiceName]cloud.ServiceConfiguration{}}
	}
	var (
		cred azcore.TokenCredential
		err  error
	)
	switch {
	case c.TenantID != "" && c.ClientID != "" && c.ClientSecret != "":
		cred, err = azidentity.NewClientSecretCredential(c.TenantID, c.ClientID, c.ClientSecret, &azidentity.ClientSecretCredentialOptions{ClientOptions: opts})
	case c.TenantID != "" && c.ClientID != "" && c.ClientCertificate != "":
		certs, key, perr := azidentity.ParseCertificates([]byte(c.ClientCertificate), []byte(c.ClientCertificatePassword))
		if perr != nil {
			return nil, "", fmt.Errorf("has a clientCertificate that is not a PEM or PKCS#12 certificate with its key: %w", errNoDetail)
		}
		cred, err = azidentity.NewClientCertificateCredential(c.TenantID, c.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{ClientOptions: opts})
	case c.Tenant != "" && c.AppID != "" && c.Password != "":
		cred, err = azidentity.NewClientSecretCredential(c.Tenant, c.AppID, c.Password, &azidentity.ClientSecretCredentialOptions{ClientOptions: opts})
	case c.ClientID != "" && c.TenantID == "":
		return nil, "", fmt.Errorf("holds only clientId, which would make the agent use the managed identity of its own pod or node, not credentials of the Secret: " +
			"write a service principal's tenantId, clientId and clientSecret (or clientCertificate) in it")
	default:
		return nil, "", fmt.Errorf("holds no Azure credentials: write tenantId, clientId and clientSecret (or clientCertificate), or appId, tenant and password")
	}
	if err != nil {
		return nil, "", fmt.Errorf("holds Azure credentials that cannot be used: %w", errNoDetail)
	}
	return cred, c.AuthorityHost, nil
}

// cloudKey is a cloud master key of a file, ready to decrypt its data
// key: decrypt is nil when the Secret has no credentials for it, refused
// says why the agent will not send it when it will not.
type cloudKey struct {
	service, id, entry, fields string
	decrypt                    func(context.Context) ([]byte, error)
	refused                    error
}

// awsRegion is what an AWS region looks like: a host label, so that the
// endpoint is the service's own (kms.REGION.amazonaws.com).
var awsRegion = regexp.MustCompile(`^[a-z]{2,4}(-[a-z0-9]+)+-[0-9]+$`)

// awsKeyARN is how sops reads a key's ARN, its region first.
var awsKeyARN = regexp.MustCompile(`^arn:aws[\w-]*:kms:(.+):[0-9]+:(key|alias)/.+$`)

// prepare returns mk as a cloudKey, with c's credentials for it; ok is
// false when mk is not a cloud key. The addresses of mk (the file's
// metadata) and of c's entry are checked before any request is made.
func (c *cloudCredentials) prepare(mk keys.MasterKey) (k cloudKey, ok bool) {
	hc := c.client()
	switch key := mk.(type) {
	case *kms.MasterKey:
		k = cloudKey{service: "AWS KMS", id: key.Arn, entry: AWSEntry, fields: "YAML with aws_access_key_id and aws_secret_access_key"}
		region := ""
		if m := awsKeyARN.FindStringSubmatch(key.Arn); m != nil {
			region = m[1]
		}
		switch {
		case key.AwsProfile != "":
			k.refused = fmt.Errorf("it names aws_profile %s, a profile of the agent's own AWS configuration, which driftless never reads: encrypt the file again without --aws-profile", key.AwsProfile)
		case !awsRegion.MatchString(region):
			k.refused = fmt.Errorf("its region %s is not an AWS region (such as eu-west-2): encrypt the file again for a key's ARN", region)
		case c.aws != nil:
			kms.NewCredentialsProvider(c.aws).ApplyToMasterKey(key)
			k.decrypt = key.DecryptContext
		}
	case *gcpkms.MasterKey:
		k = cloudKey{service: "GCP KMS", id: key.ResourceID, entry: GCPEntry, fields: "a service account's JSON key"}
		if c.gcp != nil {
			if c.gcpTokenURL != "" {
				k.refused = c.allowed("the token_uri "+c.gcpTokenURL+" of entry "+GCPEntry, c.gcpTokenURL)
			}
			ctx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
			gcpkms.NewTokenSource(c.gcp.TokenSource(ctx)).ApplyToMasterKey(key)
			k.decrypt = key.DecryptContext
		}
	case *azkv.MasterKey:
		k = cloudKey{service: "Azure Key Vault", id: key.VaultURL + "/keys/" + key.Name, entry: AzureEntry, fields: "tenantId, clientId and clientSecret"}
		if c.azure != nil {
			k.refused = c.allowed("the Azure Key Vault address "+key.VaultURL+" of the file's sops metadata", key.VaultURL)
			if k.refused == nil && c.azureAuthority != "" {
				k.refused = c.allowed("the authorityHost "+c.azureAuthority+" of entry "+AzureEntry, c.azureAuthority)
			}
			azkv.NewTokenCredential(c.azure).ApplyToMasterKey(key)
			azkv.NewClientOptions(&azkeys.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hc}}).ApplyToMasterKey(key)
			k.decrypt = key.DecryptContext
		}
	case *hcvault.MasterKey:
		k = cloudKey{service: "Vault Transit", id: key.VaultAddress + "/v1/" + key.EnginePath + "/keys/" + key.KeyName, entry: VaultEntry, fields: "a Vault token"}
		if c.vault != "" {
			k.refused = c.allowed("the Vault Transit address "+key.VaultAddress+" of the file's sops metadata", key.VaultAddress)
			hcvault.Token(c.vault).ApplyToMasterKey(key)
			hcvault.NewHTTPClient(c.vaultClient()).ApplyToMasterKey(key)
			k.decrypt = key.DecryptContext
		}
	default:
		return cloudKey{}, false
	}
	return k, true
}

// dataKey decrypts the data key with a cloud key service of the group
// that c has credentials for. Otherwise it returns, for each cloud key
// of the group, why it did not decrypt it: no credentials (the entry to
// add), an address the agent will not send to, or the service's answer.
func (c *cloudCredentials) dataKey(group sops.KeyGroup) ([]byte, []string) {
	var why []string
	for _, mk := range group {
		k, ok := c.prepare(mk)
		switch {
		case !ok:
			continue
		case k.refused != nil:
			why = append(why, fmt.Sprintf("is encrypted for %s key %s: %v", k.service, k.id, k.refused))
			continue
		case k.decrypt == nil:
			why = append(why, fmt.Sprintf("is encrypted for %s key %s, and the key Secret has no %s entry (%s)", k.service, k.id, k.entry, k.fields))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), cloudTimeout)
		key, err := k.decrypt(ctx)
		cancel()
		if err == nil && len(key) == 32 {
			return key, nil
		}
		if err == nil {
			err = fmt.Errorf("it returned a data key of %d bytes, not 32", len(key))
		}
		why = append(why, fmt.Sprintf("%s key %s did not decrypt it with the credentials of %s: %v", k.service, k.id, k.entry, err))
	}
	return nil, why
}
