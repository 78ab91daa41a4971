package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/forwarded"
)

// Auth turns on the in-cluster mode: every request must carry the
// viewer's bearer token (the login page's cookie, or an Authorization
// header), which the API server reviews (TokenReview); every view and
// action is authorised for that user (SubjectAccessReview), and every
// other read and write is made impersonating the user.
type Auth struct {
	// Client is the dashboard's own identity (the agent's): it creates
	// TokenReviews and SubjectAccessReviews, and watches Syncs.
	Client client.Client
	// Config is the dashboard's own connection; requests as a viewer are
	// made with it, impersonating the viewer's user and groups.
	Config *rest.Config
	// TrustedProxies are the proxies in front of the dashboard (an
	// Ingress): the sign-in limit counts refused tokens per client they
	// forward (X-Forwarded-For), not per proxy. Empty: per TCP peer.
	TrustedProxies []netip.Prefix
	// ReviewTTL is how long a token's review and an authorisation are
	// trusted before the API server is asked again, also by live
	// streams; 0 is DefaultReviewTTL.
	ReviewTTL time.Duration
	// StreamLife is how long a live stream lasts at most; the browser
	// then opens it again, and is reviewed afresh. 0 is
	// DefaultStreamLife.
	StreamLife time.Duration
}

// DefaultReviewTTL and DefaultStreamLife are Auth's defaults.
const (
	DefaultReviewTTL  = 30 * time.Second
	DefaultStreamLife = time.Hour
)

// SessionCookie holds the viewer's token: HttpOnly, Secure,
// SameSite=Strict.
const SessionCookie = "driftless-session"

// viewer is who a request is from, as the API server reviewed its token.
type viewer struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
	// fromCookie: the token came from the login cookie, so POSTs must
	// carry the session's CSRF token.
	fromCookie bool
	// csrf is the session's CSRF token.
	csrf string
	// token and client are what reviewed it: the bearer token and the
	// address it came from, so that a live stream can review it again.
	token, client string
}

type viewerKey struct{}

func viewerOf(ctx context.Context) *viewer {
	v, _ := ctx.Value(viewerKey{}).(*viewer)
	return v
}

// session is what every page's layout shows of the viewer: empty in
// local mode.
type session struct {
	User string
	CSRF string
}

func sessionOf(ctx context.Context) session {
	v := viewerOf(ctx)
	if v == nil {
		return session{}
	}
	return session{User: v.User, CSRF: v.csrf}
}

// authenticator reviews tokens and authorises requests, remembering each
// answer for Auth.ReviewTTL.
type authenticator struct {
	Auth
	// key signs CSRF tokens; it is made at start, so a restart ends every
	// form in flight (not the sessions).
	key []byte
	now func() time.Time

	mu      sync.Mutex
	reviews map[[32]byte]review
	// accepted holds the tokens the API server accepted, until it
	// refuses them: the sign-in limit never holds them back.
	accepted map[[32]byte]bool
	allowed  map[string]decision
	// limiters count each client's refused tokens.
	limiters map[string]*rate.Limiter
	// impersonating holds a client per user and groups.
	impersonating map[string]client.Client
}

type review struct {
	v   *viewer
	exp time.Time
}

type decision struct {
	ok     bool
	reason string
	exp    time.Time
}

func newAuthenticator(a Auth, now func() time.Time) (*authenticator, error) {
	if a.Client == nil || a.Config == nil {
		return nil, errors.New("in-cluster dashboard: no client of its own to review tokens with")
	}
	if a.ReviewTTL <= 0 {
		a.ReviewTTL = DefaultReviewTTL
	}
	if a.StreamLife <= 0 {
		a.StreamLife = DefaultStreamLife
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return &authenticator{Auth: a, key: key, now: now, reviews: map[[32]byte]review{}, accepted: map[[32]byte]bool{}, allowed: map[string]decision{},
		limiters: map[string]*rate.Limiter{}, impersonating: map[string]client.Client{}}, nil
}

// cacheBound is how many entries each of the authenticator's maps holds
// before it is emptied.
const cacheBound = 4096

// csrfOf is the CSRF token of the session of token.
func (a *authenticator) csrfOf(token string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("csrf\x00"))
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// errUnauthenticated says the API server did not accept a token.
var errUnauthenticated = errors.New("the API server did not accept the token")

// errTooMany says a client sent too many tokens the API server refused.
var errTooMany = errors.New("too many refused sign-in attempts from your address: wait a minute")

// review asks the API server who token is (TokenReview), or answers from
// the reviews of the last Auth.ReviewTTL. client is the address the
// token came from (sender): once it has sent too many tokens the API
// server refused, its new tokens are not reviewed, but a token accepted
// before always is.
func (a *authenticator) review(ctx context.Context, token, client string) (*viewer, error) {
	sum := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	if r, ok := a.reviews[sum]; ok && now.Before(r.exp) {
		a.mu.Unlock()
		v := *r.v
		return &v, nil
	}
	held := !a.accepted[sum] && a.limiter(client).TokensAt(now) < 1
	a.mu.Unlock()
	if held {
		return nil, errTooMany
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := a.Client.Create(ctx, tr); err != nil {
		return nil, fmt.Errorf("review the token with the API server: %w", err)
	}
	if !tr.Status.Authenticated {
		a.mu.Lock()
		delete(a.accepted, sum)
		a.limiter(client).AllowN(now, 1)
		a.mu.Unlock()
		return nil, errUnauthenticated
	}
	u := tr.Status.User
	v := &viewer{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: map[string][]string{}, csrf: a.csrfOf(token), token: token, client: client}
	for k, e := range u.Extra {
		v.Extra[k] = e
	}
	a.mu.Lock()
	if len(a.reviews) >= cacheBound {
		clear(a.reviews)
	}
	if len(a.accepted) >= cacheBound {
		clear(a.accepted)
	}
	a.reviews[sum] = review{v: v, exp: now.Add(a.ReviewTTL)}
	a.accepted[sum] = true
	a.mu.Unlock()
	c := *v
	return &c, nil
}

// sender is the address r came from, as the sign-in limit counts it: the
// TCP peer, or the client a trusted proxy forwarded.
func (a *authenticator) sender(r *http.Request) string {
	return forwarded.Sender(r, a.TrustedProxies)
}

// limiter is the sign-in limit of client: a burst of 20 refused tokens,
// then one every 3 seconds. The caller holds a.mu.
func (a *authenticator) limiter(client string) *rate.Limiter {
	l, ok := a.limiters[client]
	if !ok {
		if len(a.limiters) >= cacheBound {
			clear(a.limiters)
		}
		l = rate.NewLimiter(rate.Every(3*time.Second), 20)
		a.limiters[client] = l
	}
	return l
}

// authorize asks the API server whether v may verb Syncs in namespace
// (name: one of them; namespace "": every namespace) with a
// SubjectAccessReview, or answers from the last reviews. It returns the
// refusal to show when v may not.
func (a *authenticator) authorize(ctx context.Context, v *viewer, verb, namespace, name string) (bool, string, error) {
	key := strings.Join([]string{v.User, strings.Join(v.Groups, ","), verb, namespace, name}, "\x00")
	now := a.now()
	a.mu.Lock()
	d, ok := a.allowed[key]
	a.mu.Unlock()
	if ok && now.Before(d.exp) {
		return d.ok, d.reason, nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: v.User, UID: v.UID, Groups: v.Groups, Extra: map[string]authorizationv1.ExtraValue{},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: v1alpha1.GroupVersion.Group, Resource: "syncs",
			Verb: verb, Namespace: namespace, Name: name},
	}}
	for k, e := range v.Extra {
		sar.Spec.Extra[k] = e
	}
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, "", fmt.Errorf("ask the API server whether %s may %s Syncs: %w", v.User, verb, err)
	}
	d = decision{ok: sar.Status.Allowed && !sar.Status.Denied, exp: now.Add(a.ReviewTTL)}
	if !d.ok {
		d.reason = refusal(v.User, verb, namespace, name)
	}
	a.mu.Lock()
	if len(a.allowed) >= cacheBound {
		clear(a.allowed)
	}
	a.allowed[key] = d
	a.mu.Unlock()
	return d.ok, d.reason, nil
}

// stillAllowed is what a live stream of r asks before each render and
// every Auth.ReviewTTL (each answer is remembered that long): does the
// API server still accept the viewer's token, and may the viewer still
// get the Sync key (none, for the fleet's stream, whose render keeps only
// what the viewer may list). An error ends the stream. Nil in local mode.
func (s *Server) stillAllowed(r *http.Request, key client.ObjectKey) func(context.Context) error {
	v := viewerOf(r.Context())
	if v == nil || s.auth == nil {
		return nil
	}
	return func(ctx context.Context) error {
		again, err := s.auth.review(ctx, v.token, v.client)
		if err != nil || key.Name == "" {
			return err
		}
		ok, reason, err := s.auth.authorize(ctx, again, "get", key.Namespace, key.Name)
		if err == nil && !ok {
			err = errors.New(reason)
		}
		return err
	}
}

// refusal says what RBAC does not let user do, and what to ask for.
func refusal(user, verb, namespace, name string) string {
	switch {
	case name != "":
		return fmt.Sprintf("%s may not %s the Sync %s/%s: ask for a Role in namespace %s granting %q on syncs.driftless.dev", user, verb, namespace, name, namespace, verb)
	case namespace != "":
		return fmt.Sprintf("%s may not %s Syncs in namespace %s: ask for a Role there granting %q on syncs.driftless.dev", user, verb, namespace, verb)
	}
	return fmt.Sprintf("%s may not %s Syncs in any namespace that has one: ask for a Role granting %q on syncs.driftless.dev in the namespaces you need", user, verb, verb)
}

// clientAs is a client that impersonates v: user, UID, groups and
// extras, all that the API server's authorizers and admission see of a
// request (and that authorize asked about).
func (a *authenticator) clientAs(v *viewer, scheme clientOptions) (client.Client, error) {
	key := impersonationKey(v)
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.impersonating[key]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(a.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: v.User, UID: v.UID, Groups: slices.Clone(v.Groups), Extra: map[string][]string{}}
	for k, e := range v.Extra {
		cfg.Impersonate.Extra[k] = slices.Clone(e)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme, Mapper: scheme.Mapper})
	if err != nil {
		return nil, fmt.Errorf("act as %s: %w", v.User, err)
	}
	if len(a.impersonating) >= cacheBound {
		clear(a.impersonating)
	}
	a.impersonating[key] = c
	return c, nil
}

// impersonationKey tells apart the identities clientAs impersonates.
func impersonationKey(v *viewer) string {
	parts := []string{v.User, v.UID, strings.Join(v.Groups, "\x01")}
	for _, k := range slices.Sorted(maps.Keys(v.Extra)) {
		parts = append(parts, k+"\x01"+strings.Join(v.Extra[k], "\x01"))
	}
	return strings.Join(parts, "\x00")
}

// tokenOf is the request's bearer token: its Authorization header, else
// the login cookie. fromCookie says which.
func tokenOf(r *http.Request) (token string, fromCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		if t, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(t), false
		}
		return "", false
	}
	if ck, err := r.Cookie(SessionCookie); err == nil {
		return ck.Value, true
	}
	return "", false
}

// wantsHTML reports whether the request is a browser's for a page, which
// is sent to the login page rather than refused with 401.
func wantsHTML(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// middleware lets through the login page and the static assets; every
// other request must carry a token the API server accepts: without one a
// browser is sent to the login page, anything else gets 401.
func (a *authenticator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		token, fromCookie := tokenOf(r)
		if token == "" {
			a.refuse(w, r, "", "sign in: this dashboard shows each person what their own Kubernetes RBAC allows")
			return
		}
		v, err := a.review(r.Context(), token, a.sender(r))
		switch {
		case errors.Is(err, errTooMany):
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		case errors.Is(err, errUnauthenticated):
			if fromCookie {
				clearSession(w)
			}
			a.refuse(w, r, "expired", "the API server did not accept the token: it is wrong or has expired; sign in with a valid one")
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		v.fromCookie = fromCookie
		if r.Method == http.MethodPost && fromCookie {
			form, ok := postForm(w, r)
			if !ok {
				return
			}
			if !hmac.Equal([]byte(form.Get("csrf")), []byte(v.csrf)) {
				http.Error(w, "refused: the form carries no valid CSRF token of your session; use the dashboard's own form (reload it if you signed in again)", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// refuse answers a request without a valid token: a browser's page
// request goes to the login page (saying why), anything else gets 401.
func (a *authenticator) refuse(w http.ResponseWriter, r *http.Request, why, msg string) {
	if wantsHTML(r) {
		target := "/login"
		if why != "" {
			target += "?why=" + why
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="driftless"`)
	http.Error(w, msg, http.StatusUnauthorized)
}

func clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

// loginData is what the login page shows.
type loginData struct {
	Title   string
	Live    string
	Session session
	Problem string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	d := loginData{Title: "Sign in"}
	if r.URL.Query().Get("why") == "expired" {
		d.Problem = "The API server did not accept your token: it is wrong or has expired. Paste a valid one."
	}
	s.render(w, "login", http.StatusOK, d)
}

// login checks the pasted token with the API server and, when it is
// accepted, keeps it in the session cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	form, ok := postForm(w, r)
	if !ok {
		return
	}
	token := strings.TrimSpace(form.Get("token"))
	d := loginData{Title: "Sign in"}
	if token == "" {
		d.Problem = "Paste a bearer token: the output of kubectl create token, or your OIDC id-token."
		s.render(w, "login", http.StatusBadRequest, d)
		return
	}
	_, err := s.auth.review(r.Context(), token, s.auth.sender(r))
	switch {
	case errors.Is(err, errTooMany):
		d.Problem = "Too many refused sign-in attempts from your address: wait a minute and try again."
		s.render(w, "login", http.StatusTooManyRequests, d)
		return
	case errors.Is(err, errUnauthenticated):
		d.Problem = "The API server did not accept this token: it is wrong or has expired."
		s.render(w, "login", http.StatusUnauthorized, d)
		return
	case err != nil:
		d.Problem = err.Error()
		s.render(w, "login", http.StatusBadGateway, d)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout forgets the session's cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	clearSession(w)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
