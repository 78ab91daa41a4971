package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/spf13/cobra"
)

// historyOptions are the flags of `driftless history`.
type historyOptions struct {
	cluster clusterFlags
	output  string
	changes bool
}

func newHistoryCommand() *cobra.Command {
	o := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "history NAMESPACE/NAME",
		Short: "Show the recorded syncs of a Sync, newest first",
		Long: fmt.Sprintf(`Show the syncs the agent recorded for a Sync (status.history, the last %[1]d),
newest first: when each started (how long ago, and the time in UTC), the
revision and its commit's subject and author, the result (and the reason of a failure;
"Succeeded (Held)" for a sync of a held Sync, which applied the held revision), how long it took, how
many objects it created, configured, left unchanged, pruned and adopted
(took over from outside driftless), and its message. For a dry run the
counts are what it would have done. --changes also lists, under the
table, which objects each sync created, configured or pruned (at most %[2]d
per sync, and how many more).

An interval that finds nothing new in git and nothing changed in the cluster
is not recorded; a sync requested with "driftless reconcile" always is.

-o json and -o yaml print {"sync": "NAMESPACE/NAME", "history": [...]}, each
record with startedAt, revision (full SHA), subject, author, result,
reason, duration, created, configured, unchanged, pruned, adopted, message,
changes ([{action, object}]) and moreChanges; with an image update in
PullRequest mode, pullRequest ({number, url, state, commit}), also shown
under the table; "hold" is status.hold while the Sync is held (driftless
hold), also said under the table.`, v1alpha1.MaxHistory, v1alpha1.MaxRecordChanges),
		Example: `  driftless history driftless-system/default

  # and which objects each sync changed
  driftless history driftless-system/default --changes

  # the message of the last failed sync
  driftless history shop/web -o json | jq -r '[.history[] | select(.result == "Failed")][0].message'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHistory(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.changes, "changes", false, "list under the table the objects each sync created, configured or pruned (-o json and -o yaml always have them)")
	cmd.ValidArgsFunction = o.cluster.completeSyncs
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// historyRecord is one recorded sync; its JSON names are stable.
type historyRecord struct {
	StartedAt  metav1.Time `json:"startedAt"`
	Revision   string      `json:"revision"`
	Result     string      `json:"result"`
	Reason     string      `json:"reason,omitempty"`
	Duration   string      `json:"duration"`
	Created    int         `json:"created"`
	Configured int         `json:"configured"`
	Unchanged  int         `json:"unchanged"`
	Pruned     int         `json:"pruned"`
	Adopted    int         `json:"adopted"`
	Message    string      `json:"message,omitempty"`
	Subject    string      `json:"subject,omitempty"`
	Author     string      `json:"author,omitempty"`
	// Changes are never null in JSON: an empty list says "nothing".
	Changes     []objectChange `json:"changes"`
	MoreChanges int            `json:"moreChanges,omitempty"`
}

// objectChange is one object a sync changed.
type objectChange struct {
	Action string `json:"action"`
	Object string `json:"object"`
}

func newHistoryRecord(r v1alpha1.SyncRecord) historyRecord {
	rec := historyRecord{
		StartedAt: r.StartedAt, Revision: r.Revision, Result: string(r.Result), Reason: r.Reason, Duration: r.Duration,
		Created: r.Created, Configured: r.Configured, Unchanged: r.Unchanged, Pruned: r.Pruned, Adopted: r.Adopted,
		Message: r.Message, Subject: r.Subject, Author: r.Author, Changes: make([]objectChange, 0, len(r.Changes)), MoreChanges: r.MoreChanges,
	}
	for _, c := range r.Changes {
		rec.Changes = append(rec.Changes, objectChange{Action: c.Action, Object: c.Object})
	}
	return rec
}

// resultText is a record's result as a cell: "Succeeded", "Succeeded
// (Held)" for a sync of a held Sync, or "Failed" with its reason.
func (r historyRecord) resultText() string {
	if (r.Result == string(v1alpha1.ResultFailed) || r.Reason == v1alpha1.ReasonHeld) && r.Reason != "" {
		return r.Result + " (" + r.Reason + ")"
	}
	return r.Result
}

// historyReport is the data of `driftless history`.
type historyReport struct {
	Sync    string          `json:"sync"`
	History []historyRecord `json:"history"`
	// PullRequest is the image update's pull request (PullRequest mode):
	// changes proposed, not applied until merged.
	PullRequest *v1alpha1.PullRequestStatus `json:"pullRequest,omitempty"`
	// Hold is status.hold: the Sync is held (driftless hold).
	Hold    *v1alpha1.HoldStatus `json:"hold,omitempty"`
	now     time.Time
	colour  painter
	changes bool // list each record's changes under the table
}

func renderHistoryTable(w io.Writer, h historyReport) error {
	if len(h.History) == 0 {
		_, err := fmt.Fprintf(w, "Sync %s has no recorded sync yet: is the agent running, and is the Sync suspended?\n", h.Sync)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// RESULT is painted in the header too, to keep the column aligned.
	fmt.Fprintln(tw, strings.Join([]string{"AGE", "STARTED", "REVISION", "SUBJECT", "AUTHOR", h.colour.paint(colourNone, "RESULT"), "DURATION", "CREATED", "CONFIGURED", "UNCHANGED", "PRUNED", "ADOPTED", "MESSAGE"}, "\t"))
	for _, r := range h.History {
		colour := colourGreen
		if r.Result != string(v1alpha1.ResultSucceeded) {
			colour = colourRed
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n",
			age(h.now, r.StartedAt.Time), r.StartedAt.UTC().Format(time.RFC3339), orDash(source.Short(r.Revision)),
			orDash(r.Subject), orDash(r.Author),
			h.colour.paint(colour, r.resultText()), r.Duration,
			r.Created, r.Configured, r.Unchanged, r.Pruned, r.Adopted, r.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if pr := h.PullRequest; pr != nil {
		fmt.Fprintf(w, "\nImage update: pull request #%d %s (%s), robot commit %s", pr.Number, pr.URL, pr.State, orDash(source.Short(pr.Commit)))
		if pr.State == v1alpha1.PullRequestOpen {
			fmt.Fprint(w, ", applied once merged")
		}
		fmt.Fprintln(w)
	}
	if hs := h.Hold; hs != nil {
		fmt.Fprintf(w, "\n%s\n", holdLine(hs, h.Sync))
	}
	if !h.changes {
		return nil
	}
	for _, r := range h.History {
		if len(r.Changes) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s %s (%s ago):\n", orDash(source.Short(r.Revision)), r.StartedAt.UTC().Format(time.RFC3339), age(h.now, r.StartedAt.Time))
		for _, c := range r.Changes {
			fmt.Fprintf(w, "  %-10s  %s\n", strings.ToLower(c.Action), c.Object)
		}
		if r.MoreChanges > 0 {
			fmt.Fprintf(w, "  and %d more\n", r.MoreChanges)
		}
	}
	return nil
}

func runHistory(ctx context.Context, o *historyOptions, arg string, out io.Writer) error {
	v, err := newView(o.output, tableView[historyReport](renderHistoryTable))
	if err != nil {
		return err
	}
	_, s, _, err := o.cluster.namedSync(ctx, arg)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(s)
	h := historyReport{Sync: key.String(), History: make([]historyRecord, 0, len(s.Status.History)), Hold: s.Status.Hold,
		now: time.Now(), colour: painter(isTerminal(out)), changes: o.changes}
	for _, r := range s.Status.History {
		h.History = append(h.History, newHistoryRecord(r))
	}
	if u := s.Status.ImageUpdate; u != nil {
		h.PullRequest = u.PullRequest
	}
	return v.Render(out, h)
}
