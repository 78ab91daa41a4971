package update

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// DefaultTitle is the pull request title template when the Sync sets none.
const DefaultTitle = `Update images: {{join .Images ", "}}`

// maxTitle is the longest title written (GitHub allows 256 characters,
// GitLab 255).
const maxTitle = 250

// Proposal is what PullRequest mode asks of the provider after an update
// of the robot branch.
type Proposal struct {
	Forge *Forge
	// Sync names the Sync (namespace/name) in the body.
	Sync string
	// Head is the robot branch; Base the branch the request merges into.
	Head, Base string
	// Title is a text/template over .Changes and .Images; empty is
	// DefaultTitle.
	Title  string
	Labels []string
	// Update is the outcome of Run with FromBase: its changes against
	// the base, and the robot branch's commit.
	Update Outcome
	// Last is the request the previous update recorded, if any.
	Last *v1alpha1.PullRequestStatus
}

// Action is what Propose did with the provider.
type Action string

// Actions of Propose.
const (
	ActionNone   Action = ""
	ActionOpen   Action = "opened"
	ActionEdit   Action = "updated"
	ActionClose  Action = "closed"
	actionLookup Action = "lookup"
)

// Proposed is the outcome of Propose.
type Proposed struct {
	Action Action
	// PullRequest is the request to record in the status (nil: none).
	PullRequest *v1alpha1.PullRequestStatus
}

// decide says what to do with the provider, given whether the update
// has changes against the base, whether it moved the robot branch, the
// open request of the robot branch (nil: none) and the one last
// recorded. One request per robot branch: an open one is updated, never
// doubled; a change already proposed (last.Commit is the robot branch's
// commit) whose request is no longer open was merged or closed by a
// person, and is not proposed again. A newer change opens a new one.
func decide(changes, pushed bool, open *PullRequest, last *v1alpha1.PullRequestStatus, commit string) Action {
	switch {
	case !changes && open != nil:
		return ActionClose
	case !changes:
		return actionLookup
	case open != nil && (pushed || last == nil || last.Number != open.Number || last.Commit != commit):
		return ActionEdit
	case open != nil:
		return ActionNone
	case last != nil && last.Commit == commit:
		return actionLookup
	default:
		return ActionOpen
	}
}

// Propose opens, updates or closes the robot branch's one request, as
// decide says, and returns what to record. On an error, Proposed still
// holds what was learnt (the open request found, the one opened before
// labelling failed).
func Propose(ctx context.Context, p Proposal) (Proposed, error) {
	commit := p.Update.Commit
	open, err := p.Forge.FindOpen(ctx, p.Head)
	if err != nil {
		return Proposed{PullRequest: p.Last}, fmt.Errorf("find the open pull request of branch %s: %w", p.Head, err)
	}
	status := func(pr PullRequest, commit string) *v1alpha1.PullRequestStatus {
		return &v1alpha1.PullRequestStatus{Number: pr.Number, URL: pr.URL, State: pr.State, Commit: commit}
	}
	action := decide(len(p.Update.Changes) > 0, p.Update.Pushed, open, p.Last, commit)
	switch action {
	case ActionClose:
		last := ""
		if p.Last != nil && p.Last.Number == open.Number {
			last = p.Last.Commit
		}
		if err := p.Forge.Close(ctx, open.Number); err != nil {
			return Proposed{PullRequest: status(*open, last)}, fmt.Errorf("close pull request #%d, whose changes branch %s already has: %w", open.Number, p.Base, err)
		}
		open.State = v1alpha1.PullRequestClosed
		return Proposed{Action: action, PullRequest: status(*open, last)}, nil
	case actionLookup:
		if p.Last == nil || p.Last.State != v1alpha1.PullRequestOpen {
			return Proposed{PullRequest: p.Last}, nil
		}
		pr, err := p.Forge.Get(ctx, p.Last.Number)
		if err != nil {
			return Proposed{PullRequest: p.Last}, fmt.Errorf("read pull request #%d: %w", p.Last.Number, err)
		}
		return Proposed{PullRequest: status(pr, p.Last.Commit)}, nil
	case ActionNone:
		return Proposed{PullRequest: status(*open, commit)}, nil
	}
	title, err := Title(p.Title, p.Update.Changes)
	if err != nil {
		return Proposed{PullRequest: p.Last}, err
	}
	body := Body(p.Sync, p.Base, p.Update)
	if action == ActionEdit {
		if err := p.Forge.Edit(ctx, open.Number, title, body); err != nil {
			return Proposed{PullRequest: status(*open, p.lastCommit(open.Number))}, fmt.Errorf("update pull request #%d: %w", open.Number, err)
		}
		return Proposed{Action: action, PullRequest: status(*open, commit)}, nil
	}
	pr, err := p.Forge.Open(ctx, NewPullRequest{Head: p.Head, Base: p.Base, Title: title, Body: body, Labels: p.Labels})
	if pr.Number == 0 {
		return Proposed{PullRequest: p.Last}, fmt.Errorf("open a pull request from branch %s into %s: %w", p.Head, p.Base, err)
	}
	pr.State = v1alpha1.PullRequestOpen
	return Proposed{Action: ActionOpen, PullRequest: status(pr, commit)}, err
}

func (p Proposal) lastCommit(number int) string {
	if p.Last != nil && p.Last.Number == number {
		return p.Last.Commit
	}
	return ""
}

// Title renders tmpl (empty: DefaultTitle) over the changes and the
// images they set, cut to maxTitle characters.
func Title(tmpl string, changes []v1alpha1.ImageChange) (string, error) {
	t, err := template.New("title").Funcs(template.FuncMap{"join": strings.Join}).Parse(orDefault(tmpl, DefaultTitle))
	if err != nil {
		return "", fmt.Errorf("spec.imageUpdate.pullRequest.title is not a Go template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, struct {
		Changes []v1alpha1.ImageChange
		Images  []string
	}{changes, Images(changes)}); err != nil {
		return "", fmt.Errorf("spec.imageUpdate.pullRequest.title: %w", err)
	}
	title := strings.Join(strings.Fields(b.String()), " ")
	if r := []rune(title); len(r) > maxTitle {
		title = string(r[:maxTitle-1]) + "…"
	}
	return title, nil
}

// Images are the images the changes set, each once, as image:tag: a
// marker of a tag alone (":tag") is named with its image.
func Images(changes []v1alpha1.ImageChange) []string {
	var out []string
	for _, c := range changes {
		img := c.New
		if !strings.ContainsAny(c.New, "/:@") && c.Image != "" {
			img = c.Image + ":" + c.New
		}
		if !slices.Contains(out, img) {
			out = append(out, img)
		}
	}
	return out
}

// Body is the request's description: one table row per change (file,
// line, image, old → new, policy), the commits it stands on, and how the
// request is kept.
func Body(sync, base string, u Outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "driftless image automation for Sync `%s` updates %d marker%s:\n\n", sync, len(u.Changes), plural(len(u.Changes)))
	b.WriteString("| file | line | image | old → new | policy |\n| --- | --- | --- | --- | --- |\n")
	for _, c := range u.Changes {
		fmt.Fprintf(&b, "| `%s` | %d | `%s` | `%s` → `%s` | %s |\n", cell(c.File), c.Line, cell(c.Image), cell(c.Old), cell(c.New), cell(c.Policy))
	}
	fmt.Fprintf(&b, "\nCommit %s, on top of %s of branch `%s`.\n\n", source.Short(u.Commit), source.Short(u.Revision), base)
	b.WriteString("Each update force-pushes this branch on top of the base and rewrites this description; " +
		"once the base has these changes, the request is closed. Edit the ImagePolicies, not this branch.\n")
	return b.String()
}

// cell keeps a value inside its table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "`", "'", "\n", " ").Replace(s)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
