package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/syncview"
	"github.com/spf13/cobra"
)

// reconcileOptions are the flags of `driftless reconcile`.
type reconcileOptions struct {
	cluster clusterFlags
	output  string
	wait    bool
	timeout time.Duration
	// poll is how often --wait reads the Sync.
	poll time.Duration
}

func newReconcileCommand() *cobra.Command {
	o := &reconcileOptions{poll: 250 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "reconcile NAMESPACE/NAME",
		Short: "Sync a Sync now, and with --wait print the outcome",
		Long: `Ask the agent to sync a Sync now rather than at its next interval: resolve
its ref, render, read every live object and compare it with git (even when
the drift watches saw nothing, as the first sync after an agent start does),
apply what differs and prune.
The request is the annotation driftless.dev/requested-at (the time of the
request) on the Sync; the agent syncs on every change of it, and records the
sync in status.history even when nothing changed.

Without --wait the command returns once the request is made. With --wait it
prints a line while the agent works (and each wave it waits for), then the
outcome: the revision, the Ready reason and message (what was created,
configured and pruned, each drift put back with its fields, from what to
what and who had changed it — "1 reverted: ConfigMap/shop/cart-config
data.CURRENCY: JPY → USD" — or why the sync failed).

Exit status: 0 when the sync succeeded (or, without --wait, was requested),
1 when it failed or --timeout passed first, 2 for a Sync that does not exist,
a suspended Sync or wrong arguments.

-o json and -o yaml print {"sync", "requestedAt"} and, with --wait,
"result" (the recorded sync, with the fields of "driftless history").`,
		Example: `  # sync now and wait for the outcome
  driftless reconcile driftless-system/default --wait

  # in CI, after a merge: fail the job when the sync fails
  driftless reconcile shop/web --wait --timeout 10m -o json > sync.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runReconcile(ctx, o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until the agent has synced, print the outcome, and exit 1 if the sync failed")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "with --wait, how long to wait for the sync to be recorded")
	cmd.ValidArgsFunction = o.cluster.completeSyncs
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// reconcileReport is the data of `driftless reconcile`.
type reconcileReport struct {
	Sync string `json:"sync"`
	// RequestedAt is the time written in the request annotation.
	RequestedAt time.Time `json:"requestedAt"`
	// Result is the sync that handled the request (with --wait).
	Result *historyRecord `json:"result,omitempty"`
	colour painter
}

func renderReconcileText(w io.Writer, r reconcileReport) error {
	if r.Result == nil {
		_, err := fmt.Fprintf(w, "requested a sync of %s; follow it with `driftless history %s`\n", r.Sync, r.Sync)
		return err
	}
	res := r.Result
	if res.Result == string(v1alpha1.ResultSucceeded) {
		_, err := fmt.Fprintf(w, "%s %s at %s in %s (Ready: %s): %s\n", r.colour.paint(colourGreen, "synced"), r.Sync,
			source.Short(res.Revision), res.Duration, res.Reason, res.Message)
		return err
	}
	at := ""
	if res.Revision != "" {
		at = " at " + source.Short(res.Revision)
	}
	_, err := fmt.Fprintf(w, "%s %s%s after %s (Ready: False, %s): %s\n", r.colour.paint(colourRed, "sync failed:"), r.Sync, at,
		res.Duration, res.Reason, res.Message)
	return err
}

// stalledSince returns the Stalled=True condition of got when it became
// so after the request at requested, or was not so in before, the Sync
// as it was when the request was made; else nil.
func stalledSince(got, before *v1alpha1.Sync, requested time.Time) *metav1.Condition {
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	if !meta.IsStatusConditionTrue(before.Status.Conditions, v1alpha1.ConditionStalled) ||
		!c.LastTransitionTime.Time.Before(requested.Truncate(time.Second)) {
		return c
	}
	return nil
}

func runReconcile(ctx context.Context, o *reconcileOptions, arg string, out, errOut io.Writer) error {
	v, err := newView(o.output, tableView[reconcileReport](renderReconcileText))
	if err != nil {
		return err
	}
	c, s, host, err := o.cluster.namedSync(ctx, arg)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(s)
	if s.Spec.Suspend {
		return &exitError{code: 2, err: fmt.Errorf("the Sync %s is suspended: the agent does not sync it; resume it first with `driftless resume %s`", key, key)}
	}
	var before *v1alpha1.SyncRecord
	if len(s.Status.History) > 0 {
		before = &s.Status.History[0]
	}
	now := time.Now()
	if err := syncview.RequestSync(ctx, c, s, now); err != nil {
		return err
	}
	r := reconcileReport{Sync: key.String(), RequestedAt: now.UTC(), colour: painter(isTerminal(out))}
	if !o.wait {
		return v.Render(out, r)
	}

	fmt.Fprintf(errOut, "waiting for the agent to sync %s (at most %s)\n", key, o.timeout)
	var lastProgress v1alpha1.SyncProgress
	err = wait.PollUntilContextTimeout(ctx, o.poll, o.timeout, true, func(ctx context.Context) (bool, error) {
		var got v1alpha1.Sync
		if err := c.Get(ctx, key, &got); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return false, fmt.Errorf("the Sync %s was deleted while waiting for its sync", key)
			case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
				return false, &exitError{code: 2, err: fmt.Errorf("stopped waiting for %s: the cluster at %s no longer lets you read it (%w); the sync goes on: ask for get on syncs.%s there, or use --context with an identity that has it",
					key, host, err, v1alpha1.GroupVersion.Group)}
			}
			return false, nil // the next poll tries again
		}
		if rec := v1alpha1.HandledRecord(&got, now, before); rec != nil {
			hr := newHistoryRecord(*rec)
			r.Result = &hr
			return true, nil
		}
		if c := stalledSince(&got, s, now); c != nil {
			return false, &exitError{code: 1, err: fmt.Errorf("the agent stopped syncing %s (Stalled: %s): %s; it tries again when the Sync's spec changes",
				key, c.Reason, c.Message)}
		}
		if p := got.Status.Progress; p != nil && *p != lastProgress {
			lastProgress = *p
			fmt.Fprintf(errOut, "  %s: wave %d (%d of %d): %d of %d objects applied, %d healthy\n",
				source.Short(p.Revision), p.Wave, p.Index, p.Waves, p.Applied, p.Total, p.Healthy)
		}
		return false, nil
	})
	if err != nil {
		if ee := (*exitError)(nil); errors.As(err, &ee) {
			return ee
		}
		if !wait.Interrupted(err) {
			return &exitError{code: 1, err: err}
		}
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &exitError{code: 1, err: fmt.Errorf("stopped waiting for %s; the sync goes on: follow it with `driftless history %s`", key, key)}
		}
		return &exitError{code: 1, err: fmt.Errorf("the agent recorded no sync of %s within %s: is the agent running? `driftless get syncs -n %s` shows the Sync's Ready reason",
			key, o.timeout, key.Namespace)}
	}
	if err := v.Render(out, r); err != nil {
		return err
	}
	if r.Result.Result != string(v1alpha1.ResultSucceeded) {
		return &exitError{code: 1}
	}
	return nil
}

// suspendOptions are the flags of `driftless suspend` and `resume`.
type suspendOptions struct {
	cluster clusterFlags
	output  string
}

func newSuspendCommand() *cobra.Command { return newSuspendOrResumeCommand(true) }
func newResumeCommand() *cobra.Command  { return newSuspendOrResumeCommand(false) }

func newSuspendOrResumeCommand(suspend bool) *cobra.Command {
	o := &suspendOptions{}
	cmd := &cobra.Command{
		Use:   "suspend NAMESPACE/NAME",
		Short: "Stop a Sync: no syncs, no drift reverts, the cluster left as it is",
		Long: `Set spec.suspend on a Sync: the agent stops syncing it and stops putting
back changes made in the cluster to its objects, until "driftless resume".
Its objects and its status stay as they are.

-o json and -o yaml print {"sync", "suspended", "changed"}: changed is false
when the Sync already was suspended.`,
		Example: `  # hold the Sync while you debug in the cluster
  driftless suspend shop/web
  kubectl -n shop edit deployment web
  driftless resume shop/web`,
	}
	if !suspend {
		cmd.Use = "resume NAMESPACE/NAME"
		cmd.Short = "Resume a suspended Sync: it syncs at once"
		cmd.Long = `Clear spec.suspend on a Sync: the agent syncs it at once and then at every
interval. That sync reads every live object of the Sync and compares it with
git, as "driftless reconcile" does, so changes made in the cluster meanwhile
are put back, and its Ready message names them.

-o json and -o yaml print {"sync", "suspended", "changed"}: changed is false
when the Sync was not suspended.`
		cmd.Example = `  driftless resume shop/web
  driftless get syncs -n shop --watch`
	}
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return runSuspend(cmd.Context(), o, args[0], suspend, cmd.OutOrStdout())
	}
	cmd.ValidArgsFunction = o.cluster.completeSyncs
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// suspendReport is the data of `driftless suspend` and `resume`.
type suspendReport struct {
	Sync      string `json:"sync"`
	Suspended bool   `json:"suspended"`
	// Changed is false when the Sync already was as asked.
	Changed bool `json:"changed"`
}

func renderSuspendText(w io.Writer, r suspendReport) error {
	var err error
	switch {
	case r.Suspended && r.Changed:
		_, err = fmt.Fprintf(w, "suspended %s: the agent changes nothing until `driftless resume %s`\n", r.Sync, r.Sync)
	case r.Suspended:
		_, err = fmt.Fprintf(w, "%s was already suspended; resume it with `driftless resume %s`\n", r.Sync, r.Sync)
	case r.Changed:
		_, err = fmt.Fprintf(w, "resumed %s: the agent syncs it now; see the outcome with `driftless history %s`\n", r.Sync, r.Sync)
	default:
		_, err = fmt.Fprintf(w, "%s was not suspended; nothing to do\n", r.Sync)
	}
	return err
}

func runSuspend(ctx context.Context, o *suspendOptions, arg string, suspend bool, out io.Writer) error {
	v, err := newView(o.output, tableView[suspendReport](renderSuspendText))
	if err != nil {
		return err
	}
	c, s, _, err := o.cluster.namedSync(ctx, arg)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(s)
	changed, err := syncview.SetSuspend(ctx, c, s, suspend)
	if err != nil {
		return err
	}
	r := suspendReport{Sync: key.String(), Suspended: suspend, Changed: changed}
	return v.Render(out, r)
}
