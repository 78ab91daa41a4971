package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/internal/receiver"
)

// webhookChange is a one-object change committed to git and announced by
// a GitHub push notice to the agent's webhook receiver, as a git provider
// would send it once the push landed.
type webhookChange struct {
	// Applied is from sending the notice until the ConfigMap changed in
	// the cluster; Ready until the Sync was Ready at the commit.
	Applied timing `json:"push_to_applied_s"`
	Ready   timing `json:"push_to_ready_s"`
	// Reply is the receiver's reply time: it answers once the Sync is
	// queued, before the sync runs.
	Reply timing `json:"reply_s"`
	// Engine is the syncs' own duration, from their status.
	Engine timing `json:"engine_s"`
	// Requests are driftless's own requests for the last change, from the
	// commit until the Sync's status recorded it (the receiver's read of
	// its Secret included, when its cache had expired).
	Requests requestSummary `json:"driftless_requests"`
	// OverTriggered is Applied's median over the spec-edit triggered
	// changes' median, measured alternately in the same run.
	OverTriggered float64 `json:"applied_over_triggered"`
}

func (w *webhookChange) add(c changeRun) {
	w.Applied.add(c.applied)
	w.Ready.add(c.ready)
	w.Reply.add(c.reply)
	w.Engine.add(c.engine)
	w.Requests = summarize(c.requests)
}

// installWebhookSecret creates the agent's webhook Secret with a new
// random GitHub secret.
func (b *bench) installWebhookSecret(ctx context.Context) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	b.hookSecret = []byte(hex.EncodeToString(key))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: webhookSecretName},
		Data:       map[string][]byte{receiver.GitHub: b.hookSecret},
	}
	if err := b.admin.Create(ctx, secret); err != nil {
		return fmt.Errorf("create the webhook Secret %s/%s: %w", syncNamespace, webhookSecretName, err)
	}
	return nil
}

// githubPush is the part of GitHub's push event the receiver reads, with
// the commit it announces.
type githubPush struct {
	Ref        string `json:"ref"`
	After      string `json:"after"`
	Repository struct {
		FullName string `json:"full_name"`
		CloneURL string `json:"clone_url"`
	} `json:"repository"`
	HeadCommit struct {
		ID string `json:"id"`
	} `json:"head_commit"`
}

// push sends GitHub's push notice for revision on main of the live
// repository to the agent's receiver, signed with the webhook secret, and
// returns the reply time. A reply that does not say the live Sync was
// woken is an error.
func (b *bench) push(ctx context.Context, l *live, revision string, n int) (time.Duration, error) {
	if l.agent.hooks == "" {
		return 0, fmt.Errorf("the agent serves no webhooks")
	}
	var p githubPush
	p.Ref, p.After, p.HeadCommit.ID = "refs/heads/main", revision, revision
	p.Repository.FullName, p.Repository.CloneURL = "bench/fleet", l.repo.url()
	body, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	code, reply, d, err := b.postHook(ctx, l.agent.hooks, "push", fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), n), body)
	if err != nil {
		return 0, err
	}
	want := syncNamespace + "/" + l.sync
	if code != http.StatusOK || !slices.Contains(reply.Woken, want) {
		return 0, fmt.Errorf("the webhook receiver did not wake %s: %d %s (woke %v)", want, code, reply.Message, reply.Woken)
	}
	return d, nil
}

// postHook POSTs body to /hooks/github as GitHub does (a new connection,
// X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256) and returns the
// status, the reply and how long the reply took.
func (b *bench) postHook(ctx context.Context, base, event, delivery string, body []byte) (int, receiver.Reply, time.Duration, error) {
	var reply receiver.Reply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/hooks/"+receiver.GitHub, bytes.NewReader(body))
	if err != nil {
		return 0, reply, 0, err
	}
	mac := hmac.New(sha256.New, b.hookSecret)
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/bench")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, reply, 0, fmt.Errorf("POST %s/hooks/github: %w", base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	d := time.Since(start)
	if err != nil {
		return 0, reply, 0, fmt.Errorf("POST %s/hooks/github: read the reply: %w", base, err)
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return 0, reply, 0, fmt.Errorf("POST %s/hooks/github: the reply is not JSON: %w: %q", base, err, data)
	}
	return resp.StatusCode, reply, d, nil
}
