package notify

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/oci"
)

// notice is one event about a Sync, as the recorder saw it.
type notice struct {
	sync     types.NamespacedName
	labels   map[string]string
	event    Event // Succeeded stands for "Ready", with changes or not
	changes  bool  // the sync created, configured or pruned something
	reason   string
	message  string
	revision string
	commit   commit
	gone     bool // the Sync was deleted: forget it
	// status, when set, is a commit status notice instead (Syncing,
	// Synced); the other fields are unused.
	status *statusNotice
}

// noticeOf classifies an event the controllers record on a Sync. It
// reports false for events that notify nothing: waiting for a dependency,
// a failed drift check (the next sync reports it). The end of a deletion
// notifies nothing either, but is a notice that the Sync is gone.
func noticeOf(s *v1alpha1.Sync, eventtype, reason, action, message string) (notice, bool) {
	n := notice{
		sync:     types.NamespacedName{Namespace: s.Namespace, Name: s.Name},
		reason:   reason,
		message:  message,
		revision: s.Status.LastAppliedRevision,
	}
	if len(s.Labels) > 0 {
		n.labels = make(map[string]string, len(s.Labels))
		for k, v := range s.Labels {
			n.labels[k] = v
		}
	}
	switch {
	case action == "Sync" && reason == v1alpha1.ReasonSucceeded:
		n.event = Succeeded
		if h := s.Status.History; len(h) > 0 && h[0].Result == v1alpha1.ResultSucceeded {
			n.changes = h[0].Created+h[0].Configured+h[0].Pruned > 0
		}
	case action == "Sync" && reason == v1alpha1.ReasonDriftDetected:
		n.event = DriftReported // a dry run that would change something
	case action == "Delete" && reason != v1alpha1.ReasonDeletionFailed:
		n.gone = true
	case action == "Sync" && reason == v1alpha1.ReasonDependencyNotReady:
		return n, false
	case action == "Sync" && eventtype == corev1.EventTypeWarning:
		n.event = Failed
		if reason == v1alpha1.ReasonHealthCheckFailed {
			n.event = HealthTimeout
		}
		if s.Status.LastAttemptedRevision != "" {
			n.revision = s.Status.LastAttemptedRevision
		}
	case action == "Revert" && reason == v1alpha1.ReasonDriftReverted:
		n.event = DriftReverted
	case action == "Revert" && reason == v1alpha1.ReasonDriftDetected:
		n.event = DriftReported
	case action == "Revert" && reason == v1alpha1.ReasonFight:
		n.event = Paused
	case action == "ImageUpdate":
		return imageNotice(s, n, reason)
	default:
		return n, false
	}
	n.commit = commitOf(s, n.revision)
	return n, true
}

// imageNotice classifies an image automation event: the commit or the
// pull request it made, or its failure. Its revision is the commit the
// message names, not one the Sync applied, so none is attached.
func imageNotice(s *v1alpha1.Sync, n notice, reason string) (notice, bool) {
	n.revision = ""
	switch reason {
	case v1alpha1.ReasonImageUpdateCommitted:
		if s.Spec.ImageUpdate != nil && s.Spec.ImageUpdate.ImageUpdateModeOrDefault() == v1alpha1.ImageUpdatePullRequest {
			return n, false // the pull request's own event follows and says more
		}
		n.event = ImageUpdated
	case v1alpha1.ReasonImageUpdatePullRequest:
		n.event = ImageUpdated
	case v1alpha1.ReasonImageUpdateFailed:
		n.event = ImageUpdateFailed
	default:
		return n, false // Report mode's pending updates: status and events only
	}
	return n, true
}

// commit is what a message says about the revision: the subject and
// author from the Sync's history, and a link to the commit's page; for
// an OCI Sync, the artifact's address instead of a link.
type commit struct {
	Subject, Author, URL string
	Artifact             string
}

// commitOf finds revision in s's history (the newest record of it that
// has a subject) and links it when the Sync's git URL allows (CommitURL).
// An OCI Sync's revision is an artifact: commitOf names it by its
// address (oci.Reference).
func commitOf(s *v1alpha1.Sync, revision string) commit {
	if revision == "" {
		return commit{}
	}
	if s.Spec.Source.Kind() == v1alpha1.SourceOCI {
		return commit{Artifact: oci.Reference(s.Spec.Source.OCI.URL, revision)}
	}
	c := commit{URL: CommitURL(s.Spec.Source.Git.URL, revision)}
	for _, h := range s.Status.History {
		if h.Revision == revision && h.Subject != "" {
			c.Subject, c.Author = h.Subject, h.Author
			break
		}
	}
	return c
}

// Message is one notification, before a provider words it.
type Message struct {
	Sync   types.NamespacedName
	Labels map[string]string
	Event  Event
	Reason string
	// Summary is one line for people: what happened to which Sync.
	Summary string
	// Detail is the event's note: what failed or changed, and where.
	Detail   string
	Revision string
	// Subject and Author of the revision's commit, and CommitURL, its
	// web page: empty when not known.
	Subject, Author, CommitURL string
	// Artifact is the address of an OCI Sync's revision
	// (oci://<host>/<path>:<tag>@sha256:<hex>); empty for a git Sync.
	Artifact string
	Time     time.Time
	// Count is how many events this message stands for.
	Count int
}

func atRevision(rev string) string {
	if rev == "" {
		return ""
	}
	return fmt.Sprintf(" at %s", source.Short(rev))
}
