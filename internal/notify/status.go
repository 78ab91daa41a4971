package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// CommitState is where a Sync stands at a revision, as a commit status
// says it.
type CommitState string

// Commit states. GitLab names them running, success, failed, canceled.
const (
	// StatePending: the Sync started syncing the revision.
	StatePending CommitState = "pending"
	// StateSuccess: the Sync is Ready at the revision.
	StateSuccess CommitState = "success"
	// StateFailure: the sync of the revision failed; the description
	// says why.
	StateFailure CommitState = "failure"
	// StateError: a newer revision superseded it before it was Ready.
	StateError CommitState = "error"
	// StateHeld: the Sync is held at an older revision; this one waits
	// for the hold's release. Providers show it as pending, with the
	// hold in the description.
	StateHeld CommitState = "held"
)

// MaxDescription is the longest description GitHub accepts on a status.
const MaxDescription = 140

// DefaultAddresses are the API base URLs of status types that have a
// public default.
var DefaultAddresses = map[string]string{
	TypeGitHubStatus: "https://api.github.com",
	TypeGitLabStatus: "https://gitlab.com/api/v4",
}

func (t *Target) status() bool {
	return t.Type == TypeGitHubStatus || t.Type == TypeGitLabStatus || t.Type == TypeGiteaStatus
}

func (t *Target) completeStatus(readFile func(field, name string) (string, error)) error {
	if t.URL != "" || t.URLFile != "" || t.HMACKeyFile != "" {
		return fmt.Errorf("a %s target takes address and tokenFile, not url, urlFile or hmacKeyFile", t.Type)
	}
	if len(t.Events) > 0 {
		return fmt.Errorf("a %s target takes no events: it reports every revision each selected Sync syncs", t.Type)
	}
	if t.Address == "" {
		t.Address = DefaultAddresses[t.Type]
	}
	if t.Address == "" {
		return fmt.Errorf("address is required: the API base URL, such as https://gitea.example.com/api/v1")
	}
	if !absoluteHTTP(t.Address) {
		return fmt.Errorf("address %q is not an absolute http:// or https:// URL", t.Address)
	}
	t.Address = strings.TrimRight(t.Address, "/")
	if t.TargetURL != "" && !absoluteHTTP(t.TargetURL) {
		return errors.New("targetURL is not an absolute http:// or https:// URL")
	}
	if t.TokenFile == "" {
		return errors.New("tokenFile is required: a file holding the API token")
	}
	tok, err := readFile("tokenFile", t.TokenFile)
	if err != nil {
		return err
	}
	if tok == "" {
		return errors.New("tokenFile is empty")
	}
	t.token = tok
	return t.parseSelector()
}

// gitHost is the host whose repositories t reports on (see APIGitHost).
func (t *Target) gitHost() string { return APIGitHost(t.Address) }

// APIGitHost is the host whose repositories the API at address serves:
// the address's host, and github.com for api.github.com. Ports do not
// count. A token for the API goes only where this is the repository's
// host (commit statuses, image update pull requests).
func APIGitHost(address string) string {
	u, err := url.Parse(address)
	if err != nil {
		return ""
	}
	h := strings.ToLower(u.Hostname())
	if h == "api.github.com" {
		return "github.com"
	}
	return h
}

// statusNotice is a Sync's state at a revision, before a target words it.
type statusNotice struct {
	sync   types.NamespacedName
	labels map[string]string
	gitURL string
	// kind is the kind of the Sync's source: only a git Sync's revision
	// is a commit, with a commit status.
	kind     v1alpha1.SourceKind
	repo     string // the Sync's CommitStatusRepositoryAnnotation
	revision string
	state    CommitState
	reason   string
	message  string
}

func statusNoticeOf(s *v1alpha1.Sync, revision string, state CommitState, reason, message string) statusNotice {
	n := statusNotice{sync: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, gitURL: s.Spec.Source.Git.URL, kind: s.Spec.Source.Kind(),
		repo: s.Annotations[v1alpha1.CommitStatusRepositoryAnnotation], revision: revision, state: state, reason: reason, message: message}
	if len(s.Labels) > 0 {
		n.labels = make(map[string]string, len(s.Labels))
		for k, v := range s.Labels {
			n.labels[k] = v
		}
	}
	return n
}

// repository is the repository t posts n's status to: the Sync's
// driftless.dev/commit-status-repository annotation, or the path of its
// git URL when the URL's host is t's. ok is false otherwise: the Sync's
// repository is not on t's server, or the Sync follows an OCI artifact,
// whose revision is no commit of any repository.
func (t *Target) repository(n statusNotice) (string, bool) {
	if n.kind != v1alpha1.SourceGit {
		return "", false
	}
	if n.repo != "" {
		return strings.Trim(n.repo, "/"), true
	}
	host, repo, ok := source.RepositoryAddress(n.gitURL)
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(host, ":")
	return repo, name == t.gitHost()
}

// StatusContext is the name of a Sync's commit status:
// driftless/<cluster>/<namespace>/<name>.
func StatusContext(cluster string, sync types.NamespacedName) string {
	return "driftless/" + cluster + "/" + sync.Namespace + "/" + sync.Name
}

// description is n in at most MaxDescription characters.
func (n statusNotice) description(cluster string) string {
	var d string
	switch n.state {
	case StatePending:
		d = fmt.Sprintf("syncing %s in cluster %s", source.Short(n.revision), cluster)
	case StateSuccess:
		d = "Ready: " + n.message
	case StateError:
		d = "superseded by a newer revision before it was Ready"
	case StateHeld:
		d = n.message
	default:
		d = n.reason + ": " + n.message
	}
	if r := []rune(d); len(r) > MaxDescription {
		d = string(r[:MaxDescription-1]) + "…"
	}
	return d
}

// statusDelivery words n for t: the request that sets the status.
func (t *Target) statusDelivery(n statusNotice, cluster string) (delivery, error) {
	repo, ok := t.repository(n)
	if !ok {
		return delivery{}, errNotHere
	}
	link := strings.NewReplacer("{cluster}", cluster, "{namespace}", n.sync.Namespace, "{name}", n.sync.Name,
		"{revision}", n.revision).Replace(t.TargetURL)
	ctx := StatusContext(cluster, n.sync)
	desc := n.description(cluster)
	d := delivery{sync: n.sync, event: "status-" + string(n.state), headers: map[string]string{}, credential: true}
	var body any
	switch t.Type {
	case TypeGitLabStatus:
		state := map[CommitState]string{StatePending: "running", StateSuccess: "success", StateFailure: "failed", StateError: "canceled", StateHeld: "pending"}[n.state]
		d.url = t.Address + "/projects/" + url.PathEscape(repo) + "/statuses/" + n.revision
		d.headers["PRIVATE-TOKEN"] = t.token
		body = gitlabStatus{State: state, Name: ctx, Description: desc, TargetURL: link}
	default:
		d.url = t.Address + "/repos/" + escapePath(repo) + "/statuses/" + n.revision
		if t.Type == TypeGitHubStatus {
			d.headers["Authorization"] = "Bearer " + t.token
			d.headers["Accept"] = "application/vnd.github+json"
			d.headers["X-GitHub-Api-Version"] = "2022-11-28"
		} else {
			d.headers["Authorization"] = "token " + t.token
		}
		state := n.state
		if state == StateHeld {
			state = StatePending
		}
		body = StatusBody{State: string(state), Context: ctx, Description: desc, TargetURL: link}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return delivery{}, err
	}
	d.body = b
	return d, nil
}

// errNotHere: the Sync's repository is not on the target's server.
var errNotHere = errors.New("the repository is not on this server")

// StatusBody is the body of a GitHub or Gitea commit status.
type StatusBody struct {
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url,omitempty"`
}

type gitlabStatus struct {
	State       string `json:"state"`
	Name        string `json:"name"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url,omitempty"`
}

// escapePath escapes each segment of an owner/repo path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// statusMemo is what was sent about one Sync: the revision and the last
// state, so that each (Sync, revision, state) is sent once and a retry
// of a failing revision is not announced as pending again.
type statusMemo struct {
	revision string
	last     CommitState
	sent     time.Time // when the last status was due
}

// due reports whether n is news after m, and records it.
func (m *statusMemo) due(n statusNotice) bool {
	if m.revision != n.revision {
		m.revision, m.last = n.revision, n.state
		return true
	}
	if n.state == StatePending || n.state == m.last {
		return false // pending only opens a revision
	}
	m.last = n.state
	return true
}
