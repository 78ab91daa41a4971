package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/syncview"
)

// action is one of the three writes the dashboard makes.
type action struct {
	Name     string // in the URL
	Verb     string // on the button
	Question string
	do       func(ctx context.Context, c client.Client, s *v1alpha1.Sync, now time.Time) (string, error)
}

var actions = map[string]action{
	"reconcile": {Name: "reconcile", Verb: "Sync now",
		Question: "Ask the agent to sync this Sync now: resolve its ref, compare every live object with git, apply what differs and prune.",
		do: func(ctx context.Context, c client.Client, s *v1alpha1.Sync, now time.Time) (string, error) {
			if s.Spec.Suspend {
				return "", errors.New("the Sync is suspended: the agent does not sync it; resume it first")
			}
			if err := syncview.RequestSync(ctx, c, s, now); err != nil {
				return "", err
			}
			return "Requested a sync; this page shows its outcome in History when the agent records it.", nil
		}},
	"suspend": {Name: "suspend", Verb: "Suspend",
		Question: "Suspend this Sync: the agent stops syncing it and stops putting back changes made in the cluster, until it is resumed.",
		do:       setSuspend(true, "Suspended: the agent changes nothing until it is resumed.", "The Sync already was suspended.")},
	"resume": {Name: "resume", Verb: "Resume",
		Question: "Resume this Sync: the agent syncs it at once, comparing every live object with git, and then at every interval.",
		do:       setSuspend(false, "Resumed: the agent syncs it now.", "The Sync was not suspended; nothing to do.")},
}

// setSuspend is the action that sets spec.suspend to suspend, saying done
// when it did and already when the Sync already was so.
func setSuspend(suspend bool, done, already string) func(context.Context, client.Client, *v1alpha1.Sync, time.Time) (string, error) {
	return func(ctx context.Context, c client.Client, s *v1alpha1.Sync, _ time.Time) (string, error) {
		changed, err := syncview.SetSuspend(ctx, c, s, suspend)
		switch {
		case err != nil:
			return "", err
		case !changed:
			return already, nil
		}
		return done, nil
	}
}

// actionData is what the confirmation and result pages show.
type actionData struct {
	syncHeader
	Action  action
	Message string
	// Refused is the API server's refusal, or another error.
	Refused string
}

// confirmPage asks before an action: the only way to act is the POST
// form it shows.
func (s *Server) confirmPage(w http.ResponseWriter, r *http.Request) {
	a, ok := actions[r.PathValue("action")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _, h, ok := s.header(w, r)
	if !ok {
		return
	}
	h.Title = a.Verb + " " + h.Key.String() + "?"
	h.Live = ""
	s.render(w, "confirm", http.StatusOK, actionData{syncHeader: h, Action: a})
}

// act does a confirmed action as the viewer, after checking that the
// form was posted by the dashboard's own page.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	a, ok := actions[r.PathValue("action")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if err := sameOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	form, ok := postForm(w, r)
	if !ok {
		return
	}
	if form.Get("confirm") != "yes" {
		http.Error(w, "the action was not confirmed: use the form of its confirmation page", http.StatusBadRequest)
		return
	}
	c, sy, h, ok := s.header(w, r)
	if !ok || !s.authorized(w, r, c, "patch", h.Key) {
		return
	}
	h.Live = ""
	d := actionData{syncHeader: h, Action: a}
	// Write the Sync as read from the API server, not the watch's copy.
	var fresh v1alpha1.Sync
	cl, err := c.clientFor(r.Context())
	if err == nil {
		err = cl.Get(r.Context(), client.ObjectKeyFromObject(sy), &fresh)
	}
	if err == nil {
		d.Message, err = a.do(r.Context(), cl, &fresh, s.opts.Now())
	}
	status := http.StatusOK
	if err != nil {
		d.Message, d.Refused = "", err.Error()
		status = http.StatusConflict
		var api apierrors.APIStatus
		if errors.As(err, &api) {
			status = int(api.Status().Code)
		}
	}
	d.Title = fmt.Sprintf("%s %s", a.Verb, h.Key)
	s.render(w, "result", status, d)
}

// sameOrigin refuses a POST that another site's page made: the browser's
// Origin header (or, without one, Sec-Fetch-Site) must name this server.
func sameOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err == nil && u.Host == r.Host && (u.Scheme == "http" || u.Scheme == "https") {
			return nil
		}
		return fmt.Errorf("refused: the form was posted from %s, not from this dashboard", o)
	}
	if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return nil
	}
	return errors.New("refused: the request does not say it comes from this dashboard (no Origin header); use the dashboard's own form")
}
