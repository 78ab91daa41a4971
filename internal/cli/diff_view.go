package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// diffView shows a diff report; there is one per --output format.
type diffView interface {
	Render(w io.Writer, r *diffReport) error
}

var (
	_ diffView = textDiffView{}
	_ diffView = jsonDiffView{}
)

func newDiffView(output string) (diffView, error) {
	switch output {
	case "", "text":
		return textDiffView{}, nil
	case "json":
		return jsonDiffView{}, nil
	}
	return nil, fmt.Errorf("unknown --output %q: use text or json", output)
}

// textDiffView is for people: per changed object a header and its
// unified diff, then a summary line.
type textDiffView struct{}

var actionSigns = map[diffAction]string{diffCreate: "+", diffUpdate: "~", diffDelete: "-"}

func (textDiffView) Render(w io.Writer, r *diffReport) error {
	var b strings.Builder
	for _, c := range r.Changes {
		fmt.Fprintf(&b, "%s %s", actionSigns[c.Action], c.ID)
		if c.Origin != "" {
			fmt.Fprintf(&b, " (%s)", c.Origin)
		}
		if c.Reason != "" {
			fmt.Fprintf(&b, ": %s", c.Reason)
		}
		b.WriteString("\n")
		// A deletion is its header; its diff would repeat the whole object.
		if c.Action != diffDelete {
			b.WriteString(c.Diff)
		}
		b.WriteString("\n")
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "! %s", s.ID)
		if s.Origin != "" {
			fmt.Fprintf(&b, " (%s)", s.Origin)
		}
		fmt.Fprintf(&b, " is left alone: %s\n", s.Reason)
	}
	if len(r.Skipped) > 0 {
		b.WriteString("\n")
	}
	s := r.Summary
	fmt.Fprintf(&b, "%d to create, %d to change, %d to prune, %d unchanged", s.Create, s.Update, s.Delete, s.Unchanged)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, ", %d skipped", s.Skipped)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonDiffView is for programs: the report as one JSON object.
type jsonDiffView struct{}

func (jsonDiffView) Render(w io.Writer, r *diffReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
