package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/spf13/cobra"
)

// The commands that read and act on Syncs (get, history, reconcile,
// suspend, resume) share their cluster flags, their output flag and
// their views: one for people (a table or a few lines), one JSON and one
// YAML, behind one interface per command's data.

// parseSyncArg reads the NAMESPACE/NAME argument of a command.
func parseSyncArg(arg string) (client.ObjectKey, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("%q: write the Sync as NAMESPACE/NAME, such as driftless-system/default; list them with `driftless get syncs -A`", arg)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// getSync reads the Sync key. A Sync that does not exist, or a cluster
// without the Sync API, is an error with exit code 2 that says what to do.
func getSync(ctx context.Context, c client.Reader, key client.ObjectKey, host string) (*v1alpha1.Sync, error) {
	var s v1alpha1.Sync
	if err := c.Get(ctx, key, &s); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, &exitError{code: 2, err: fmt.Errorf("no Sync named %s in namespace %s of the cluster at %s: list the Syncs of every namespace with `driftless get syncs -A`",
				key.Name, key.Namespace, host)}
		case meta.IsNoMatchError(err):
			return nil, &exitError{code: 2, err: fmt.Errorf("the cluster at %s serves no Sync API: is driftless installed? (%w)", host, err)}
		}
		return nil, fmt.Errorf("read Sync %s: %w", key, err)
	}
	return &s, nil
}

// namedSync connects with the flags and reads the Sync that arg names
// (NAMESPACE/NAME), with getSync's errors. It also returns the client and
// the API server's address, for messages.
func (f *clusterFlags) namedSync(ctx context.Context, arg string) (client.WithWatch, *v1alpha1.Sync, string, error) {
	key, err := parseSyncArg(arg)
	if err != nil {
		return nil, nil, "", err
	}
	c, _, host, err := f.syncClient()
	if err != nil {
		return nil, nil, "", err
	}
	s, err := getSync(ctx, c, key, host)
	return c, s, host, err
}

// view shows a command's data T; there is one per --output format.
type view[T any] interface {
	Render(w io.Writer, v T) error
}

// tableView is the view for people: an aligned table or a few lines.
type tableView[T any] func(w io.Writer, v T) error

func (f tableView[T]) Render(w io.Writer, v T) error { return f(w, v) }

// jsonView is for programs: the data as one indented JSON document.
type jsonView[T any] struct{}

func (jsonView[T]) Render(w io.Writer, v T) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// yamlView is the JSON document as YAML, with the same field names.
type yamlView[T any] struct{}

func (yamlView[T]) Render(w io.Writer, v T) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

var (
	_ view[int] = tableView[int](nil)
	_ view[int] = jsonView[int]{}
	_ view[int] = yamlView[int]{}
)

// outputUsage is the usage of every -o flag of these commands.
const outputUsage = "output format: table, json or yaml"

func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "table", outputUsage)
}

func newView[T any](output string, table tableView[T]) (view[T], error) {
	switch output {
	case "", "table":
		return table, nil
	case "json":
		return jsonView[T]{}, nil
	case "yaml":
		return yamlView[T]{}, nil
	}
	return nil, fmt.Errorf("unknown --output %q: use table, json or yaml", output)
}

// isTerminal reports whether w is a terminal that may show colour
// (NO_COLOR unset).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Colours of a cell. Every code has the same length, so that a column
// painted in any of them stays aligned by text/tabwriter.
const (
	colourNone   = "\x1b[39m"
	colourGreen  = "\x1b[32m"
	colourRed    = "\x1b[31m"
	colourYellow = "\x1b[33m"
	colourReset  = "\x1b[0m"
)

// painter colours table cells, or leaves them alone when off.
type painter bool

func (p painter) paint(colour, s string) string {
	if !p {
		return s
	}
	return colour + s + colourReset
}

// readyText is a Ready status as a cell: "True", or the status and its
// reason, such as "False (FetchFailed)"; "Unknown" when it is missing.
func readyText(status, reason string) string {
	switch {
	case status == "":
		return "Unknown"
	case status == "True" || reason == "":
		return status
	}
	return status + " (" + reason + ")"
}

// readyColour is the colour of a Ready cell.
func readyColour(status string) string {
	switch status {
	case "True":
		return colourGreen
	case "False":
		return colourRed
	}
	return colourYellow
}

// age is how long ago t was, as kubectl prints it ("12s", "5m3s", "2d");
// "-" for no time.
func age(now time.Time, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

// orDash is s, or "-" when s is empty, for table cells.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// completeSyncs completes a NAMESPACE/NAME argument with the Syncs of the
// cluster of the flags, for shell completion.
func (f *clusterFlags) completeSyncs(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, _, _, err := f.syncClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list v1alpha1.SyncList
	if err := c.List(ctx, &list); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var keys []string
	for _, s := range list.Items {
		if key := s.Namespace + "/" + s.Name; strings.HasPrefix(key, toComplete) {
			keys = append(keys, key)
		}
	}
	return keys, cobra.ShellCompDirectiveNoFileComp
}
