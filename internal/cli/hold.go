package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/spf13/cobra"
)

// holdOptions are the flags of `driftless hold`.
type holdOptions struct {
	cluster  clusterFlags
	output   string
	revision string
	previous bool
	reason   string
}

func newHoldCommand() *cobra.Command {
	o := &holdOptions{}
	cmd := &cobra.Command{
		Use:   "hold NAMESPACE/NAME --reason TEXT [--revision REV | --previous]",
		Short: "Keep a Sync at one revision of its branch, with a reason, until released",
		Long: fmt.Sprintf(`Hold a Sync at a commit of its branch: the agent applies that commit instead
of the branch's tip, at once and at every interval, puts back changes made in
the cluster to what that commit says, and leaves newer commits waiting until
"driftless release". Use it in an incident to go back to the last good commit
without a commit to git (and while git itself is the problem).

The revision is --revision (a full commit hash, or a prefix of one that
status.history of the Sync names), --previous (the newest revision in
status.history that succeeded and is not the one applied now), or, with
neither, the revision applied now (status.lastAppliedRevision). The agent
applies it only if it is in the history of the Sync's branch and passes
spec.source.git.verify when that is set; otherwise the Sync is Stalled with
reason %[1]s, saying why, and the cluster stays as it is.

The hold is the annotation %[2]s (JSON: revision, reason, who held it,
from a SelfSubjectReview, and when) written by server-side apply as the field
manager %[3]s, with a sync request: a parent Sync that applies this Sync
from git leaves it. The Sync reports Ready with reason %[4]s, "held at abc1234
by jane: payment errors; 3 commits pending (tip def5678)"; "driftless get"
and "driftless history" show it.

-o json and -o yaml print {"sync", "revision", "reason", "by", "at"}.`,
			v1alpha1.ReasonHoldRefused, v1alpha1.HoldAnnotation, v1alpha1.HoldFieldManager, v1alpha1.ReasonHeld),
		Example: `  # the last commit broke payments: back to the one before, and stay there
  driftless hold shop/web --previous --reason "payment errors after 4f2a9c1"

  # hold at a named commit
  driftless hold shop/web --revision 9b1d3e7 --reason "INC-2231"

  # when it is fixed in git, follow the branch again
  driftless release shop/web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHold(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.reason, "reason", "", fmt.Sprintf("why the Sync is held (required, at most %d bytes): conditions, events and commit statuses quote it", v1alpha1.MaxHoldReason))
	f.StringVar(&o.revision, "revision", "", "the commit to hold at: a full hash, or a prefix of a revision in the Sync's status.history")
	f.BoolVar(&o.previous, "previous", false, "hold at the newest revision in status.history that succeeded and is not the one applied now")
	cmd.MarkFlagsMutuallyExclusive("revision", "previous")
	cmd.ValidArgsFunction = o.cluster.completeSyncs
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// holdReport is the data of `driftless hold`.
type holdReport struct {
	Sync     string    `json:"sync"`
	Revision string    `json:"revision"`
	Reason   string    `json:"reason"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

func renderHoldText(w io.Writer, r holdReport) error {
	_, err := fmt.Fprintf(w, "held %s at %s (%s): the agent applies it now and stays there until `driftless release %s`; `driftless get sync %s` shows the commits pending\n",
		r.Sync, source.Short(r.Revision), r.Reason, r.Sync, r.Sync)
	return err
}

func runHold(ctx context.Context, o *holdOptions, arg string, out io.Writer) error {
	if strings.TrimSpace(o.reason) == "" {
		return &exitError{code: 2, err: errors.New("--reason is required: say why the Sync is held (\"payment errors after 4f2a9c1\"); everyone who reads the Sync sees it")}
	}
	if len(o.reason) > v1alpha1.MaxHoldReason {
		return &exitError{code: 2, err: fmt.Errorf("--reason is %d bytes long, over %d: link to the incident instead", len(o.reason), v1alpha1.MaxHoldReason)}
	}
	v, err := newView(o.output, tableView[holdReport](renderHoldText))
	if err != nil {
		return err
	}
	c, s, _, err := o.cluster.namedSync(ctx, arg)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(s)
	revision, err := holdRevision(s, o.revision, o.previous)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	by, err := whoAmI(ctx, c)
	if err != nil {
		return err
	}
	now := time.Now()
	h := &v1alpha1.Hold{Revision: revision, Reason: o.reason, By: by, At: now.UTC().Truncate(time.Second)}
	if err := applyHold(ctx, c, key, h, now); err != nil {
		return fmt.Errorf("hold Sync %s: %w", key, err)
	}
	return v.Render(out, holdReport{Sync: key.String(), Revision: revision, Reason: h.Reason, By: by, At: h.At})
}

// holdRevision chooses the revision `driftless hold` holds s at: the
// revision rev names (a full commit hash, or a prefix of exactly one
// revision of s's status.history), with previous the newest revision of
// status.history that succeeded and is not the one applied now, or else
// the one applied now. Its errors say what to give instead.
func holdRevision(s *v1alpha1.Sync, rev string, previous bool) (string, error) {
	current := s.Status.LastAppliedRevision
	switch {
	case previous:
		for _, r := range s.Status.History {
			if r.Result == v1alpha1.ResultSucceeded && r.Revision != "" && r.Revision != current {
				return r.Revision, nil
			}
		}
		return "", fmt.Errorf("no revision but the one applied now (%s) succeeded in the status.history of %s/%s (it keeps the last %d syncs): "+
			"name the commit with --revision", orDash(source.Short(current)), s.Namespace, s.Name, v1alpha1.MaxHistory)
	case rev == "":
		if current == "" {
			return "", fmt.Errorf("the Sync %s/%s has applied no revision yet: name the commit to hold at with --revision", s.Namespace, s.Name)
		}
		return current, nil
	}
	rev = strings.ToLower(rev)
	if !isHex(rev) || len(rev) > 40 {
		return "", fmt.Errorf("--revision %q is not a commit hash or a prefix of one", rev)
	}
	if len(rev) == 40 {
		return rev, nil
	}
	var matches []string
	for _, known := range append([]string{current, s.Status.LastAttemptedRevision}, revisionsOf(s.Status.History)...) {
		if known != "" && strings.HasPrefix(known, rev) && !contains(matches, known) {
			matches = append(matches, known)
		}
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no revision in the status.history of %s/%s starts with %s: give the full commit hash (git rev-parse %s)", s.Namespace, s.Name, rev, rev)
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("%s is the start of %d revisions in the status.history of %s/%s (%s): give more of it", rev, len(matches), s.Namespace, s.Name, strings.Join(matches, ", "))
}

func revisionsOf(history []v1alpha1.SyncRecord) []string {
	out := make([]string, len(history))
	for i, r := range history {
		out[i] = r.Revision
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return s != ""
}

// whoAmI is the user name the API server knows the client as, from a
// SelfSubjectReview.
func whoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("ask the API server who you are (SelfSubjectReview, authentication.k8s.io/v1), to record who held the Sync: %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("the API server's SelfSubjectReview names no user: a hold records who made it")
	}
	return review.Status.UserInfo.Username, nil
}

// releaseOptions are the flags of `driftless release`.
type releaseOptions struct {
	cluster clusterFlags
	output  string
}

func newReleaseCommand() *cobra.Command {
	o := &releaseOptions{}
	cmd := &cobra.Command{
		Use:   "release NAMESPACE/NAME",
		Short: "End the hold of a Sync: it applies its branch's tip at once",
		Long: fmt.Sprintf(`Remove the hold of a Sync ("driftless hold"): the annotation %s, removed
by its field manager %s, with a sync request, so the agent applies the tip of
the Sync's branch at once (and compares every live object, as "driftless
reconcile" does). "driftless history" shows the outcome.

-o json and -o yaml print {"sync", "released", "revision"}: released is false
when the Sync was not held; revision is the commit it was held at.`, v1alpha1.HoldAnnotation, v1alpha1.HoldFieldManager),
		Example: `  driftless release shop/web
  driftless history shop/web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRelease(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = o.cluster.completeSyncs
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// releaseReport is the data of `driftless release`.
type releaseReport struct {
	Sync     string `json:"sync"`
	Released bool   `json:"released"`
	Revision string `json:"revision,omitempty"`
}

func renderReleaseText(w io.Writer, r releaseReport) error {
	if !r.Released {
		_, err := fmt.Fprintf(w, "%s was not held; nothing to do\n", r.Sync)
		return err
	}
	_, err := fmt.Fprintf(w, "released %s (held at %s): the agent syncs the tip of its branch now; see the outcome with `driftless history %s`\n",
		r.Sync, orDash(source.Short(r.Revision)), r.Sync)
	return err
}

func runRelease(ctx context.Context, o *releaseOptions, arg string, out io.Writer) error {
	v, err := newView(o.output, tableView[releaseReport](renderReleaseText))
	if err != nil {
		return err
	}
	c, s, _, err := o.cluster.namedSync(ctx, arg)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(s)
	value, held := s.Annotations[v1alpha1.HoldAnnotation]
	r := releaseReport{Sync: key.String(), Released: held}
	if !held {
		return v.Render(out, r)
	}
	if h, err := v1alpha1.HoldOf(s); err == nil {
		r.Revision = h.Revision
	} else {
		r.Revision = value
	}
	if err := applyHold(ctx, c, key, nil, time.Now()); err != nil {
		return fmt.Errorf("release Sync %s: %w", key, err)
	}
	return v.Render(out, r)
}

// holdLine says what a held Sync waits for, for `history` and `explain`.
func holdLine(hs *v1alpha1.HoldStatus, sync string) string {
	pending := fmt.Sprintf("%d commits wait", hs.Pending)
	if hs.Pending == 1 {
		pending = "1 commit waits"
	}
	return fmt.Sprintf("Held at %s by %s since %s: %s; %s (tip %s) until `driftless release %s`",
		source.Short(hs.Revision), hs.By, hs.Since.UTC().Format(time.RFC3339), hs.Reason, pending, orDash(source.Short(hs.Tip)), sync)
}

// applyHold holds the Sync key at h (h.Check must pass), or, when h is
// nil, releases it, with a sync request made at requested: it applies
// v1alpha1.HoldApply as v1alpha1.HoldFieldManager, so that a parent Sync
// that applies this Sync from git, owning other fields, leaves the hold. A
// release also removes a hold another field manager wrote (kubectl
// annotate).
func applyHold(ctx context.Context, c client.Client, key client.ObjectKey, h *v1alpha1.Hold, requested time.Time) error {
	if h != nil {
		if err := h.Check(); err != nil {
			return err
		}
	}
	u := v1alpha1.HoldApply(key.Namespace, key.Name, h, requested)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(v1alpha1.HoldFieldManager), client.ForceOwnership); err != nil {
		return err
	}
	if _, still := u.GetAnnotations()[v1alpha1.HoldAnnotation]; h != nil || !still {
		return nil
	}
	remove := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1alpha1.HoldAnnotation+`":null}}}`))
	return c.Patch(ctx, u, remove, client.FieldOwner(v1alpha1.HoldFieldManager))
}
