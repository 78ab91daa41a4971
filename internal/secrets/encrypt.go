package secrets

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"sigs.k8s.io/yaml"
)

// SecretFields is the encrypted_regex driftless encrypts with when no
// .sops.yaml rule sets one: only the data and stringData of Secrets, so
// that the rest of a manifest stays readable in a diff.
const SecretFields = "^(data|stringData)$"

// sopsVersion is the version of SOPS whose format Encrypt writes: the
// version of the sops module driftless is built with.
const sopsVersion = "3.13.3"

// Rule says for whom and what to encrypt: a creation rule of .sops.yaml.
type Rule struct {
	// Recipients are age public keys (age1…).
	Recipients []string
	// At most one of these is set; none encrypts every value.
	EncryptedRegex, UnencryptedRegex, EncryptedSuffix, UnencryptedSuffix string
	// Config is the .sops.yaml the rule came from, or "".
	Config string
}

// Encrypt returns plain, the content of the file name (its extension gives
// the format), encrypted with SOPS for rule's recipients, as the sops CLI
// writes it: the sops CLI and Keys.Decrypt both decrypt it.
func Encrypt(name string, plain []byte, rule Rule) ([]byte, error) {
	if len(rule.Recipients) == 0 {
		return nil, errors.New("no age recipient to encrypt for: pass --age age1… or add a creation rule with age: to .sops.yaml")
	}
	if Encrypted(plain) {
		return nil, fmt.Errorf("%s is already encrypted with SOPS; edit it with driftless secret edit", name)
	}
	store := FormatOf(name).store()
	branches, err := store.LoadPlainFile(plain)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read as %s: %w", name, FormatOf(name), err)
	}
	var group sops.KeyGroup
	for _, r := range rule.Recipients {
		mk, err := sopsage.MasterKeyFromRecipient(r)
		if err != nil {
			return nil, fmt.Errorf("age recipient %q is not valid; it starts with age1: %w", r, err)
		}
		group = append(group, mk)
	}
	tree := sops.Tree{
		Branches: branches,
		Metadata: sops.Metadata{
			KeyGroups:         []sops.KeyGroup{group},
			EncryptedRegex:    rule.EncryptedRegex,
			UnencryptedRegex:  rule.UnencryptedRegex,
			EncryptedSuffix:   rule.EncryptedSuffix,
			UnencryptedSuffix: rule.UnencryptedSuffix,
			Version:           sopsVersion,
		},
		FilePath: name,
	}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, err
	}
	for _, mk := range group {
		if err := mk.Encrypt(dataKey); err != nil {
			return nil, fmt.Errorf("encrypt the data key for %s: %w", mk.ToString(), err)
		}
	}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be encrypted", name)
	}
	tree.Metadata.LastModified = time.Now().UTC()
	tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil {
		return nil, fmt.Errorf("%s: the MAC cannot be encrypted", name)
	}
	return store.EmitEncryptedFile(tree)
}

// RuleFor returns the creation rule for the file at path, from the
// nearest .sops.yaml in its directory or above, up to and including
// root (the repository; "" stops at the filesystem's root). recipients,
// when not empty, replace the rule's (--age). Without a .sops.yaml, or
// with a matching rule that sets no encryption fields, it encrypts
// SecretFields.
func RuleFor(path, root string, recipients []string) (Rule, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Rule{}, err
	}
	rule := Rule{EncryptedRegex: SecretFields}
	config, err := findConfig(filepath.Dir(abs), root)
	if err != nil {
		return Rule{}, err
	}
	if config != "" {
		rule, err = ruleIn(config, abs)
		if err != nil {
			return Rule{}, err
		}
	}
	if len(recipients) > 0 {
		rule.Recipients = recipients
	}
	return rule, nil
}

// findConfig returns the nearest .sops.yaml from dir up to root, or "".
func findConfig(dir, root string) (string, error) {
	if root != "" {
		r, err := filepath.Abs(root)
		if err != nil {
			return "", err
		}
		root = r
	}
	for {
		p := filepath.Join(dir, ".sops.yaml")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if dir == root || parent == dir {
			return "", nil
		}
		dir = parent
	}
}

type creationRule struct {
	PathRegex         string `json:"path_regex"`
	Age               any    `json:"age"`
	EncryptedRegex    string `json:"encrypted_regex"`
	UnencryptedRegex  string `json:"unencrypted_regex"`
	EncryptedSuffix   string `json:"encrypted_suffix"`
	UnencryptedSuffix string `json:"unencrypted_suffix"`
	KeyGroups         []any  `json:"key_groups"`
	PGP               any    `json:"pgp"`
	KMS               any    `json:"kms"`
}

// ruleIn returns the first creation rule of config whose path_regex
// matches file, relative to config's directory, as the sops CLI does.
func ruleIn(config, file string) (Rule, error) {
	data, err := os.ReadFile(config)
	if err != nil {
		return Rule{}, err
	}
	var conf struct {
		CreationRules []creationRule `json:"creation_rules"`
	}
	if err := yaml.Unmarshal(data, &conf); err != nil {
		return Rule{}, fmt.Errorf("%s cannot be read: %w", config, err)
	}
	rel := strings.TrimPrefix(file, filepath.Dir(config)+string(filepath.Separator))
	for i, r := range conf.CreationRules {
		if r.PathRegex != "" {
			re, err := regexp.Compile(r.PathRegex)
			if err != nil {
				return Rule{}, fmt.Errorf("%s: creation_rules[%d].path_regex: %w", config, i, err)
			}
			if !re.MatchString(rel) {
				continue
			}
		}
		recipients, err := ageRecipients(r.Age)
		if err != nil {
			return Rule{}, fmt.Errorf("%s: creation_rules[%d].age: %w", config, i, err)
		}
		if len(recipients) == 0 && (r.KeyGroups != nil || r.PGP != nil || r.KMS != nil) {
			return Rule{}, fmt.Errorf("%s: creation_rules[%d] names no age recipient (key_groups, PGP and cloud KMS are not supported); add age: age1…", config, i)
		}
		rule := Rule{Recipients: recipients, EncryptedRegex: r.EncryptedRegex, UnencryptedRegex: r.UnencryptedRegex,
			EncryptedSuffix: r.EncryptedSuffix, UnencryptedSuffix: r.UnencryptedSuffix, Config: config}
		if rule.EncryptedRegex == "" && rule.UnencryptedRegex == "" && rule.EncryptedSuffix == "" && rule.UnencryptedSuffix == "" {
			rule.EncryptedRegex = SecretFields
		}
		return rule, nil
	}
	return Rule{}, fmt.Errorf("%s has no creation rule whose path_regex matches %s; add one", config, rel)
}

// ageRecipients reads age: as a comma-separated string or a list.
func ageRecipients(v any) ([]string, error) {
	var raw []string
	switch v := v.(type) {
	case nil:
	case string:
		raw = strings.Split(v, ",")
	case []any:
		for _, item := range v {
			s, ok := item.(string)
			if !ok {
				return nil, errors.New("write recipients as a string or a list of strings")
			}
			raw = append(raw, strings.Split(s, ",")...)
		}
	default:
		return nil, errors.New("write recipients as a string or a list of strings")
	}
	var out []string
	for _, r := range raw {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

// RuleOf returns the rule data, the content of the file name encrypted
// with SOPS, was encrypted with: its age recipients and what it encrypts,
// to encrypt it again after an edit.
func RuleOf(name string, data []byte) (Rule, error) {
	tree, err := FormatOf(name).store().LoadEncryptedFile(data)
	if err != nil {
		return Rule{}, fmt.Errorf("%s is not a SOPS %s file", name, FormatOf(name))
	}
	md := tree.Metadata
	rule := Rule{EncryptedRegex: md.EncryptedRegex, UnencryptedRegex: md.UnencryptedRegex,
		EncryptedSuffix: md.EncryptedSuffix, UnencryptedSuffix: md.UnencryptedSuffix}
	for _, group := range md.KeyGroups {
		for _, mk := range group {
			if ak, ok := mk.(*sopsage.MasterKey); ok {
				rule.Recipients = append(rule.Recipients, ak.Recipient)
			}
		}
	}
	return rule, nil
}
