package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// keepAlive is how often an idle stream sends a comment, so that proxies
// and browsers keep it open.
const keepAlive = 25 * time.Second

// stream serves a page's live region as Server-Sent Events: the region
// rendered by render now, and again after every change a watch reports,
// sent only when it differs from what was sent last. It ends with the
// request; in the in-cluster mode also when allowed (asked before each
// render, and every Auth.ReviewTTL) says the viewer may no longer see
// it, and after Auth.StreamLife, when the browser opens it again and is
// reviewed afresh.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, allowed func(context.Context) error, render func(context.Context) (string, error)) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	// A stream outlives the server's ReadTimeout: lift it for this request.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	ctx := r.Context()
	var recheck <-chan time.Time // never, in local mode
	if s.auth != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.auth.StreamLife)
		defer cancel()
		t := time.NewTicker(s.auth.ReviewTTL)
		defer t.Stop()
		recheck = t.C
	}
	last := ""
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		changed := s.hub.wait()
		if allowed != nil && allowed(ctx) != nil {
			return
		}
		html, err := render(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			html = fmt.Sprintf("<p role=\"alert\">%s</p>", template.HTMLEscapeString(err.Error()))
		}
		if html != last {
			last = html
			if _, err := fmt.Fprint(w, event("update", html)); err != nil {
				return
			}
			flusher.Flush()
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				break wait
			case <-recheck:
				if allowed != nil && allowed(ctx) != nil {
					return
				}
			case <-tick.C:
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
					return
				}
				flusher.Flush()
			}
		}
	}
}

// event frames html as one Server-Sent Event of type name. An event
// stream ends a line at CR, LF or CRLF and an event at an empty line, so
// each line of html is a data field of its own, and every other ASCII
// control character but tab (CR among them: a commit subject may hold
// one) is written as a character reference, which the page's HTML parser
// reads back as that character (NUL as U+FFFD, as it would read NUL
// itself).
func event(name, html string) string {
	var b strings.Builder
	b.WriteString("event: " + name + "\ndata: ")
	for _, r := range html {
		switch {
		case r == '\n':
			b.WriteString("\ndata: ")
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "&#%d;", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("\n\n")
	return b.String()
}
