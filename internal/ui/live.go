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
// request.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, render func(context.Context) (string, error)) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	ctx := r.Context()
	last := ""
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		changed := s.hub.wait()
		html, err := render(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			html = fmt.Sprintf("<p role=\"alert\">%s</p>", template.HTMLEscapeString(err.Error()))
		}
		if html != last {
			last = html
			if _, err := fmt.Fprintf(w, "event: update\ndata: %s\n\n", strings.ReplaceAll(html, "\n", "\ndata: ")); err != nil {
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
			case <-tick.C:
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
					return
				}
				flusher.Flush()
			}
		}
	}
}
