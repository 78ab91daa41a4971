package image

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/image/update"
	"github.com/driftless/driftless/internal/notify"
	"github.com/driftless/driftless/internal/source"
)

// ReasonImageUpdatePullRequest is the event reason of a pull request
// opened, updated or closed by PullRequest mode.
const ReasonImageUpdatePullRequest = v1alpha1.ReasonImageUpdatePullRequest

// TokenKey is the entry of spec.imageUpdate.pullRequest.tokenSecretRef
// that holds the API token.
const TokenKey = "token"

// pullRequestBase is the branch PullRequest mode commits on top of and
// asks to merge into: pullRequest.base, else the Sync's branch.
func pullRequestBase(s *v1alpha1.Sync) string {
	if p := s.Spec.ImageUpdate.PullRequest; p != nil && p.Base != "" {
		return p.Base
	}
	if b := s.Spec.Source.Git.Branch; b != "" {
		return b
	}
	return "master"
}

// forge returns the provider API of s's pull requests, with the token of
// its Secret (read with reader). The API must serve the host of the
// Sync's git URL, so the token goes nowhere else. Its errors say which
// field to fix and never hold the token.
func (r *UpdateReconciler) forge(ctx context.Context, reader engine.Reader, s *v1alpha1.Sync) (*update.Forge, error) {
	u := s.Spec.ImageUpdate
	p := u.PullRequest
	if p == nil || u.Branch == "" {
		return nil, errors.New("mode PullRequest needs spec.imageUpdate.pullRequest and spec.imageUpdate.branch, the robot's branch")
	}
	base := pullRequestBase(s)
	if u.Branch == base {
		return nil, fmt.Errorf("spec.imageUpdate.branch %s is the pull request's base: name another branch for the robot to push to", base)
	}
	address := p.Address
	if address == "" {
		address = update.DefaultAddresses[p.Provider]
	}
	if address == "" {
		return nil, fmt.Errorf("spec.imageUpdate.pullRequest.address is required for provider %s: the API base URL, such as https://gitea.example.com/api/v1", p.Provider)
	}
	if err := update.CheckAddress(address, p.Insecure); err != nil {
		return nil, err
	}
	host, repo, ok := source.RepositoryAddress(s.Spec.Source.Git.URL)
	if !ok {
		return nil, fmt.Errorf("spec.source.git.url %s names no repository on a server: PullRequest mode needs an https, http or SSH address", source.Redact(s.Spec.Source.Git.URL))
	}
	host, _, _ = strings.Cut(host, ":")
	if api := notify.APIGitHost(address); api != host {
		return nil, fmt.Errorf("spec.imageUpdate.pullRequest.address %s is not on %s, the host of spec.source.git.url: "+
			"the token is sent only to the repository's own host; set the address of that host's API", address, host)
	}
	name := s.Namespace + "/" + p.TokenSecretRef.Name
	var secret corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: p.TokenSecretRef.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("token Secret %s does not exist: create it with the API token under %s", name, TokenKey)
		}
		return nil, fmt.Errorf("read token Secret %s: %w", name, err)
	}
	token := strings.TrimSpace(string(secret.Data[TokenKey]))
	if token == "" {
		return nil, fmt.Errorf("token Secret %s has no %s entry: add the API token under %s", name, TokenKey, TokenKey)
	}
	return &update.Forge{Provider: p.Provider, Address: address, Insecure: p.Insecure, Repo: repo, Token: token, Client: r.HTTPClient}, nil
}

// propose opens, updates or closes the Sync's pull request after out,
// records an event for what it did, and returns the request to record.
func (r *UpdateReconciler) propose(ctx context.Context, s *v1alpha1.Sync, forge *update.Forge, out update.Outcome) (*v1alpha1.PullRequestStatus, error) {
	u := s.Spec.ImageUpdate
	var last *v1alpha1.PullRequestStatus
	if s.Status.ImageUpdate != nil {
		last = s.Status.ImageUpdate.PullRequest
	}
	base := pullRequestBase(s)
	got, err := update.Propose(ctx, update.Proposal{Forge: forge, Sync: s.Namespace + "/" + s.Name, Head: u.Branch, Base: base,
		Title: u.PullRequest.Title, Labels: u.PullRequest.Labels, Update: out, Last: last})
	if pr := got.PullRequest; pr != nil {
		switch got.Action {
		case update.ActionOpen, update.ActionEdit:
			r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonImageUpdatePullRequest, "ImageUpdate",
				"%s pull request #%d %s from branch %s into %s at %s: %s", got.Action, pr.Number, pr.URL, u.Branch, base, source.Short(pr.Commit), summary(out.Changes))
		case update.ActionClose:
			r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonImageUpdatePullRequest, "ImageUpdate",
				"closed pull request #%d %s: branch %s already has its changes", pr.Number, pr.URL, base)
		}
	}
	return got.PullRequest, err
}
