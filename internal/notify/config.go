package notify

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Event is the kind of thing a notification is about.
type Event string

// The events a target can ask for.
const (
	// Succeeded: a sync applied changes (created, configured or pruned).
	Succeeded Event = "succeeded-with-changes"
	// Failed: a sync failed (fetch, render, validation, apply, prune).
	Failed Event = "failed"
	// Recovered: a Sync that had failed is Ready again.
	Recovered Event = "recovered"
	// DriftReverted: a change made in the cluster was put back to git.
	DriftReverted Event = "drift-reverted"
	// DriftReported: a drift was found and left (dry run, selfHeal off).
	DriftReported Event = "drift-reported"
	// Paused: another writer keeps changing an object; reverts paused.
	Paused Event = "paused"
	// HealthTimeout: applied objects did not become healthy in time.
	HealthTimeout Event = "health-timeout"
	// Flapping: a Sync changed between failing and Ready too often; one
	// summary stands for the failed and recovered messages it replaces.
	// Sent to targets that ask for failed or recovered.
	Flapping Event = "flapping"
	// ImageUpdated: image automation committed new image references or
	// opened, updated or closed its pull request.
	ImageUpdated Event = "image-updated"
	// ImageUpdateFailed: image automation could not update (a policy,
	// the commit, the push or the forge failed).
	ImageUpdateFailed Event = "image-update-failed"
)

// Events lists every event a target may name, in the order of the docs.
var Events = []Event{Succeeded, Failed, Recovered, DriftReverted, DriftReported, Paused, HealthTimeout, ImageUpdated, ImageUpdateFailed}

// Provider types.
const (
	TypeGeneric = "generic"
	TypeSlack   = "slack"
	TypeTeams   = "teams"
	// Commit status types: the state of each Sync at each revision, on
	// the commit (status.go).
	TypeGitHubStatus = "github-status"
	TypeGitLabStatus = "gitlab-status"
	TypeGiteaStatus  = "gitea-status"
)

// targetTypes lists every target type, in the order of the docs.
var targetTypes = []string{TypeGeneric, TypeSlack, TypeTeams, TypeGitHubStatus, TypeGitLabStatus, TypeGiteaStatus}

// DefaultCluster is the cluster a commit status names when the agent is
// given no --cluster-name.
const DefaultCluster = "default"

// Config is the file given to --notify-config.
type Config struct {
	// Targets are where notifications go.
	Targets []Target `json:"targets"`
	// Reminder is how often an unchanged failing state is sent again
	// (default 24h).
	Reminder Duration `json:"reminder,omitempty"`
	// DriftWindow is how long drift reverts of one Sync are gathered
	// into one message (default 1m).
	DriftWindow Duration `json:"driftWindow,omitempty"`
	// FlapWindow and FlapLimit: more than FlapLimit changes between
	// failing and Ready within FlapWindow make a Sync flapping (defaults
	// 10m and 3).
	FlapWindow Duration `json:"flapWindow,omitempty"`
	FlapLimit  int      `json:"flapLimit,omitempty"`

	// Cluster names this cluster in commit statuses
	// (driftless/<cluster>/<namespace>/<name>); the agent's
	// --cluster-name, not a field of the file.
	Cluster string `json:"-"`
}

// Target is one endpoint and what it receives.
type Target struct {
	// Name identifies the target in logs and metrics; the URL never
	// appears there.
	Name string `json:"name"`
	// Type is generic, slack, teams, github-status, gitlab-status or
	// gitea-status.
	Type string `json:"type"`
	// URL of the endpoint; or URLFile, a file holding it (a mounted
	// Secret: Slack and Teams URLs are credentials).
	URL     string `json:"url,omitempty"`
	URLFile string `json:"urlFile,omitempty"`
	// HMACKeyFile, for generic targets, is a file holding the key that
	// signs each body: header X-Driftless-Signature: sha256=<hex>.
	HMACKeyFile string `json:"hmacKeyFile,omitempty"`
	// Syncs selects the Syncs; empty selects all.
	Syncs Selector `json:"syncs,omitempty"`
	// Events selects the events; empty selects all. Commit status
	// targets take none: they follow every revision.
	Events []Event `json:"events,omitempty"`
	// Address is a commit status target's API base URL (GitHub
	// https://api.github.com or https://<host>/api/v3, GitLab
	// https://<host>/api/v4, Gitea https://<host>/api/v1).
	Address string `json:"address,omitempty"`
	// TokenFile is a file holding a commit status target's API token.
	TokenFile string `json:"tokenFile,omitempty"`
	// TargetURL, for commit statuses, is the link on each status;
	// {cluster}, {namespace}, {name} and {revision} are replaced.
	TargetURL string `json:"targetURL,omitempty"`

	key   []byte
	token string
	sel   labels.Selector
}

// Selector selects Syncs by namespace and labels.
type Selector struct {
	Namespaces []string `json:"namespaces,omitempty"`
	// LabelSelector such as "team=payments,tier!=dev".
	LabelSelector string `json:"labelSelector,omitempty"`
}

// Duration is a time.Duration written as "24h" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON reads "90s", "24h".
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 30s or 24h", s)
	}
	d.Duration = v
	return nil
}

// Defaults of Config.
const (
	DefaultReminder    = 24 * time.Hour
	DefaultDriftWindow = time.Minute
	DefaultFlapWindow  = 10 * time.Minute
	DefaultFlapLimit   = 3
)

// LoadConfig reads and checks a notification config file, and reads the
// files it names (URLs, HMAC keys). Errors name the file and the target,
// never a URL or key.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read notification config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Config{}, fmt.Errorf("notification config %s: %w", path, err)
	}
	if err := c.complete(filepath.Dir(path)); err != nil {
		return Config{}, fmt.Errorf("notification config %s: %w", path, err)
	}
	return c, nil
}

// complete checks c, fills defaults and reads the files it names,
// relative to dir.
func (c *Config) complete(dir string) error {
	if c.Reminder.Duration <= 0 {
		c.Reminder.Duration = DefaultReminder
	}
	if c.DriftWindow.Duration <= 0 {
		c.DriftWindow.Duration = DefaultDriftWindow
	}
	if c.FlapWindow.Duration <= 0 {
		c.FlapWindow.Duration = DefaultFlapWindow
	}
	if c.FlapLimit <= 0 {
		c.FlapLimit = DefaultFlapLimit
	}
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	var errs []error
	names := map[string]bool{}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Name == "" {
			t.Name = fmt.Sprintf("targets[%d]", i)
		}
		if names[t.Name] {
			errs = append(errs, fmt.Errorf("target %s: the name is used twice; give each target its own name", t.Name))
		}
		names[t.Name] = true
		if err := t.complete(dir); err != nil {
			errs = append(errs, fmt.Errorf("target %s: %w", t.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (t *Target) complete(dir string) error {
	if !slices.Contains(targetTypes, t.Type) {
		return fmt.Errorf("type %q is not one of %s", t.Type, strings.Join(targetTypes, ", "))
	}
	readFile := func(field, name string) (string, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if t.status() {
		return t.completeStatus(readFile)
	}
	if t.Address != "" || t.TokenFile != "" || t.TargetURL != "" {
		return fmt.Errorf("address, tokenFile and targetURL apply to commit status targets only; a %s target takes url or urlFile", t.Type)
	}
	switch {
	case t.URL != "" && t.URLFile != "":
		return errors.New("set url or urlFile, not both")
	case t.URLFile != "":
		u, err := readFile("urlFile", t.URLFile)
		if err != nil {
			return err
		}
		t.URL = u
	case t.URL == "":
		return errors.New("url or urlFile is required")
	}
	// The URL may hold a token: say what is wrong, not what it is.
	if !absoluteHTTP(t.URL) {
		return errors.New("the URL is not an absolute http:// or https:// URL")
	}
	if t.HMACKeyFile != "" {
		if t.Type != TypeGeneric {
			return fmt.Errorf("hmacKeyFile applies to type generic only; %s endpoints authenticate by their URL", t.Type)
		}
		k, err := readFile("hmacKeyFile", t.HMACKeyFile)
		if err != nil {
			return err
		}
		if k == "" {
			return errors.New("hmacKeyFile is empty")
		}
		t.key = []byte(k)
	}
	for _, e := range t.Events {
		if !slices.Contains(Events, e) {
			return fmt.Errorf("event %q is not one of %s", e, joinEvents(Events))
		}
	}
	return t.parseSelector()
}

func (t *Target) parseSelector() error {
	sel, err := labels.Parse(t.Syncs.LabelSelector)
	if err != nil {
		return fmt.Errorf("syncs.labelSelector: %w", err)
	}
	t.sel = sel
	return nil
}

func absoluteHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// wants reports whether the target receives event about a Sync in
// namespace with labels.
func (t *Target) wants(event Event, namespace string, lbls map[string]string) bool {
	if !t.selects(namespace, lbls) {
		return false
	}
	if len(t.Events) == 0 {
		return true
	}
	if event == Flapping {
		return slices.Contains(t.Events, Failed) || slices.Contains(t.Events, Recovered)
	}
	return slices.Contains(t.Events, event)
}

// selects reports whether t's syncs selector takes a Sync in namespace
// with lbls.
func (t *Target) selects(namespace string, lbls map[string]string) bool {
	if len(t.Syncs.Namespaces) > 0 && !slices.Contains(t.Syncs.Namespaces, namespace) {
		return false
	}
	return t.sel == nil || t.sel.Matches(labels.Set(lbls))
}

func joinEvents(es []Event) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = string(e)
	}
	return strings.Join(s, ", ")
}
