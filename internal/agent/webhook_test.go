package agent_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/receiver"
	"github.com/driftless/driftless/internal/testenv"
)

// A push announced by a signed GitHub webhook converges at once, although
// the Syncs' interval is an hour; pushes to other branches or repositories
// wake nothing, and bad signatures, oversized bodies and floods are refused.
func TestAgentWebhookSyncsThePushedBranchAtOnceAndNothingElse(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	fleet := srv.NewRepo(t, "fleet")
	other := srv.NewRepo(t, "other")
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "git-deploy", Namespace: ns}, Data: map[string][]byte{"identity": srv.DeployKey, "known_hosts": srv.KnownHosts()}},
		{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: ns}, Data: map[string][]byte{"github": []byte("s3cret")}},
	} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	mainFirst := fleet.Commit(t, "main", map[string]string{"main/config.yaml": agenttest.ConfigMap(ns, "from-main", "v1")})
	fleet.Checkout(t, "dev")
	devFirst := fleet.Commit(t, "dev", map[string]string{"dev/config.yaml": agenttest.ConfigMap(ns, "from-dev", "v1")})
	fleet.Checkout(t, "main")
	otherFirst := other.Commit(t, "other", map[string]string{"other/config.yaml": agenttest.ConfigMap(ns, "from-other", "v1")})

	addr := loopbackAddr(t)
	o := agenttest.Options(t, env.Config, ns)
	o.WebhookAddr, o.WebhookSecret = addr, "webhook"
	a := agenttest.Start(t, o)
	syncs := map[string]struct {
		repo   *testenv.Repo
		branch string
	}{"main": {fleet, "main"}, "dev": {fleet, "dev"}, "other": {other, "main"}}
	for name, s := range syncs {
		sync := &v1alpha1.Sync{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.SyncSpec{
				Source: v1alpha1.Source{Git: v1alpha1.GitSource{
					URL: s.repo.SSHURL(), Branch: s.branch, SecretRef: &v1alpha1.LocalObjectReference{Name: "git-deploy"},
				}},
				Paths:    []string{name},
				Interval: metav1.Duration{Duration: time.Hour},
			},
		}
		// The agent installs the Sync CRD as it starts.
		a.Eventually("Sync "+name+" is created", func() string {
			if err := c.Create(ctx, sync); err != nil && !apierrors.IsAlreadyExists(err) {
				return err.Error()
			}
			return ""
		})
	}
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
	a.Eventually("main is applied", agenttest.AppliedAt(c, key("main"), mainFirst))
	a.Eventually("dev is applied", agenttest.AppliedAt(c, key("dev"), devFirst))
	a.Eventually("other is applied", agenttest.AppliedAt(c, key("other"), otherFirst))

	// New commits everywhere; only webhooks can bring them in before an hour.
	mainSecond := fleet.Commit(t, "main v2", map[string]string{"main/config.yaml": agenttest.ConfigMap(ns, "from-main", "v2")})
	fleet.Checkout(t, "dev")
	fleet.Commit(t, "dev v2", map[string]string{"dev/config.yaml": agenttest.ConfigMap(ns, "from-dev", "v2")})
	fleet.Checkout(t, "main")
	other.Commit(t, "other v2", map[string]string{"other/config.yaml": agenttest.ConfigMap(ns, "from-other", "v2")})

	hooks := webhookClient{t: t, url: "http://" + addr + "/hooks/github", secret: "s3cret"}
	hooks.waitListening(a)

	// Refused: a wrong signature (with a Warning event on the Secret) and
	// an oversized body.
	if code, reply := hooks.post(githubPush(fleet, "refs/heads/main"), "sha256="+sign("guess", githubPush(fleet, "refs/heads/main")), "d-bad"); code != http.StatusUnauthorized {
		t.Errorf("wrong signature: %d %+v, want 401", code, reply)
	}
	a.Eventually("a Warning event on the webhook Secret", func() string {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Secret" && e.Regarding.Name == "webhook" && e.Type == corev1.EventTypeWarning &&
				e.Reason == receiver.ReasonWebhookRejected && strings.Contains(e.Note, "X-Hub-Signature-256") {
				return ""
			}
		}
		return fmt.Sprintf("no WebhookRejected event on Secret webhook among %d events", len(list.Items))
	})
	big := bytes.Repeat([]byte(" "), 1<<20+1)
	if code, reply := hooks.post(big, "sha256="+sign("s3cret", big), "d-big"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over 1 MiB: %d %+v, want 413", code, reply)
	}

	// Pushes nothing follows: another branch, another repository.
	if code, reply := hooks.signed(githubPush(fleet, "refs/heads/feature"), "d-feature"); code != http.StatusOK || len(reply.Woken) != 0 {
		t.Errorf("a push to another branch: %d %+v, want 200 waking nothing", code, reply)
	}
	unknown := srv.NewRepo(t, "unknown")
	if code, reply := hooks.signed(githubPush(unknown, "refs/heads/main"), "d-unknown"); code != http.StatusOK || len(reply.Woken) != 0 {
		t.Errorf("a push to another repository: %d %+v, want 200 waking nothing", code, reply)
	}

	// The push to main: the payload names the repository by its HTTP clone
	// URL, its web page and its SSH URL; the Sync fetches over ssh://.
	// Other Syncs of the same repository path on other git servers of this
	// host (other tests') differ by port and are not woken.
	pushed := time.Now()
	code, reply := hooks.signed(githubPush(fleet, "refs/heads/main"), "d-main")
	if code != http.StatusOK {
		t.Fatalf("the push to main: %d %+v, want 200", code, reply)
	}
	if diff := cmp.Diff([]string{ns + "/main"}, reply.Woken); diff != "" {
		t.Errorf("Syncs woken by the push to main (-want +got):\n%s", diff)
	}
	a.Within(20*time.Second, "main is applied at the pushed commit", agenttest.AppliedAt(c, key("main"), mainSecond))
	t.Logf("push → Ready at the new commit: %s", time.Since(pushed).Round(time.Millisecond))
	if v := agenttest.Greeting(t, c, ns, "from-main"); v != "v2" {
		t.Errorf("from-main = %q after the push, want v2", v)
	}
	for name, rev := range map[string]string{"dev": devFirst, "other": otherFirst} {
		if msg := agenttest.AppliedAt(c, key(name), rev)(); msg != "" {
			t.Errorf("Sync %s was synced though no push named it: %s", name, msg)
		}
	}

	// The same delivery again is ignored.
	if code, reply := hooks.signed(githubPush(fleet, "refs/heads/main"), "d-main"); code != http.StatusOK || len(reply.Woken) != 0 ||
		!strings.Contains(reply.Message, "already received") {
		t.Errorf("a replayed delivery: %d %+v, want 200 saying it was ignored", code, reply)
	}

	// A flood is cut off.
	limited := 0
	for range 100 {
		if code, _ := hooks.post([]byte("{}"), "", ""); code == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Error("100 requests in a row: none refused with 429")
	}
	t.Logf("100 requests in a row: %d refused with 429", limited)
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// githubPush is a push event as GitHub sends it (the fields driftless
// reads and a few it does not), for repo served on loopback.
func githubPush(repo *testenv.Repo, ref string) []byte {
	web := strings.TrimSuffix(repo.HTTPURL(), ".git")
	body, _ := json.Marshal(map[string]any{
		"ref":    ref,
		"before": strings.Repeat("0", 40),
		"after":  strings.Repeat("a", 40),
		"repository": map[string]any{
			"name":           repo.Name,
			"full_name":      "platform/" + repo.Name,
			"private":        true,
			"html_url":       web,
			"url":            web,
			"clone_url":      repo.HTTPURL(),
			"ssh_url":        repo.SSHURL(), // with its port, as a self-hosted GitHub, GitLab or Gitea gives it
			"created_at":     1557933565,
			"default_branch": "main",
		},
		"pusher":  map[string]any{"name": "octocat", "email": "octocat@example.com"},
		"created": false, "deleted": false, "forced": false,
		"head_commit": map[string]any{"id": strings.Repeat("a", 40), "message": "v2"},
	})
	return body
}

// webhookClient posts to the agent's GitHub endpoint.
type webhookClient struct {
	t      *testing.T
	url    string
	secret string
}

func (w webhookClient) signed(body []byte, delivery string) (int, receiver.Reply) {
	return w.post(body, "sha256="+sign(w.secret, body), delivery)
}

func (w webhookClient) post(body []byte, signature, delivery string) (int, receiver.Reply) {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	if delivery != "" {
		req.Header.Set("X-GitHub-Delivery", delivery)
	}
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("POST %s: %v", w.url, err)
	}
	defer resp.Body.Close()
	var reply receiver.Reply
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		w.t.Fatalf("POST %s: %d, the reply is not JSON: %v", w.url, resp.StatusCode, err)
	}
	return resp.StatusCode, reply
}

// waitListening waits until the receiver answers (a GET is refused with
// 405 before any limit is counted).
func (w webhookClient) waitListening(a *agenttest.Agent) {
	w.t.Helper()
	a.Eventually("the webhook receiver listens", func() string {
		resp, err := http.Get(w.url)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			return fmt.Sprintf("GET answered %d, want 405", resp.StatusCode)
		}
		return ""
	})
}
