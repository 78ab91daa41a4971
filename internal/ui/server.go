package ui

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cluster is one kubeconfig context the dashboard shows.
type Cluster struct {
	// Name is the context's name; it is the cluster's name in every page
	// and URL.
	Name string
	// Config is the context's connection, the viewer's own identity.
	Config *rest.Config
	// Namespace is the context's namespace; unused by the fleet page,
	// which lists every namespace the viewer may list.
	Namespace string
}

// Change is one object the next sync would change, as `driftless diff
// --sync` computes it.
type Change struct {
	// ID reads Kind/namespace/name, or Kind/name when cluster-scoped.
	ID     string
	Action string
	Origin string
	// Diff is the unified diff of the object's YAML, live → git, Secret
	// values masked.
	Diff string
}

// PendingFunc computes what the next sync of the Sync key in cluster
// would change (the engine of `driftless diff --sync`), as the viewer.
type PendingFunc func(ctx context.Context, cluster string, key client.ObjectKey) ([]Change, error)

// Options configure a Server.
type Options struct {
	Clusters []Cluster
	// Pending, when set, shows on each object page what the next sync
	// would change in it.
	Pending PendingFunc
	// ConnectTimeout bounds the first list of each cluster; a cluster
	// that does not answer in time is shown as Unreachable.
	ConnectTimeout time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// LocalToken, in the local mode, is the secret of the URL `driftless
	// ui` prints: a request must carry it (in its query, once, which
	// sets a cookie) or be refused.
	LocalToken string
	// Auth, when set, serves the in-cluster mode (one cluster, whose
	// Config is the dashboard's own identity): a login page, every request
	// reviewed and authorised for its viewer, and made as the viewer. Nil
	// is the local mode: every request acts as the Clusters' identities.
	Auth *Auth
}

// Server serves the dashboard.
type Server struct {
	opts     Options
	clusters []*clusterState
	pages    map[string]*template.Template
	hub      *hub
	mux      *http.ServeMux
	// auth is the in-cluster mode's; nil in local mode.
	auth *authenticator
}

// New prepares a Server for opts; Run starts its watches.
func New(opts Options) (*Server, error) {
	if len(opts.Clusters) == 0 {
		return nil, errors.New("no cluster to show: pass a kubeconfig with at least one context")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	s := &Server{opts: opts, hub: newHub(), pages: map[string]*template.Template{}}
	if opts.Auth != nil {
		if len(opts.Clusters) != 1 {
			return nil, errors.New("the in-cluster dashboard shows one cluster: its own")
		}
		a, err := newAuthenticator(*opts.Auth, opts.Now)
		if err != nil {
			return nil, err
		}
		s.auth = a
	}
	seen := map[string]bool{}
	for _, c := range opts.Clusters {
		if seen[c.Name] {
			return nil, fmt.Errorf("context %s is named twice", c.Name)
		}
		seen[c.Name] = true
		cs, err := newClusterState(c, s.hub)
		if err != nil {
			return nil, err
		}
		cs.auth = s.auth
		s.clusters = append(s.clusters, cs)
	}
	for _, page := range []string{"fleet", "sync", "object", "confirm", "result", "login", "refused"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", page, err)
		}
		s.pages[page] = t
	}
	s.routes()
	return s, nil
}

// Run follows every cluster's Syncs until ctx ends. A cluster whose
// list fails is shown with that error, and listed again (with backoff)
// until it answers.
func (s *Server) Run(ctx context.Context) error {
	for _, c := range s.clusters {
		go c.run(ctx, s.opts.ConnectTimeout, s.opts.Now)
	}
	<-ctx.Done()
	return nil
}

// Handler is the dashboard's HTTP handler. hostCheck, when not nil,
// refuses a request whose Host header it does not accept (a DNS
// rebinding defence); see LoopbackHosts. In the in-cluster mode every
// request but the login page's and the static assets' must carry a
// token the API server accepts; in the local mode with a LocalToken,
// that token or the session cookie it sets.
func (s *Server) Handler(hostCheck func(host string) bool) http.Handler {
	switch {
	case s.auth != nil:
		return secure(hostCheck, s.auth.middleware(s.mux))
	case s.opts.LocalToken != "":
		return secure(hostCheck, s.localGate(s.mux))
	}
	return secure(hostCheck, s.mux)
}

// Serve serves Handler(hostCheck) on ln, and follows the clusters (Run),
// until ctx ends; then it stops, letting requests in flight finish for a
// few seconds.
func (s *Server) Serve(ctx context.Context, ln net.Listener, hostCheck func(string) bool) error {
	// A live stream lifts ReadTimeout for itself (stream), and is sent a
	// comment every keepAlive.
	hs := &http.Server{Handler: s.Handler(hostCheck), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = hs.Shutdown(shutdown)
	}()
	err := hs.Serve(ln)
	cancel()
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", s.fleetPage)
	m.HandleFunc("GET /live", s.fleetLive)
	m.HandleFunc("GET /c/{cluster}/syncs/{ns}/{name}", s.syncPage)
	m.HandleFunc("GET /c/{cluster}/syncs/{ns}/{name}/live", s.syncLive)
	m.HandleFunc("GET /c/{cluster}/syncs/{ns}/{name}/object", s.objectPage)
	m.HandleFunc("GET /c/{cluster}/syncs/{ns}/{name}/{action}", s.confirmPage)
	m.HandleFunc("POST /c/{cluster}/syncs/{ns}/{name}/{action}", s.act)
	if s.auth != nil {
		m.HandleFunc("GET /login", s.loginPage)
		m.HandleFunc("POST /login", s.login)
		m.HandleFunc("POST /logout", s.logout)
	}
	s.mux = m
}

// contentSecurityPolicy lets a page load only the dashboard's own script,
// style and stream, submit forms only to it, and be framed by nobody.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// maxBody bounds the body of every request: the dashboard's forms hold a
// few fields (a bearer token is at most a few KiB).
const maxBody = 64 << 10

// secure sets the security headers of every response, refuses a request
// for a Host hostCheck does not accept, and bounds every request's body
// (maxBody).
func secure(hostCheck func(string) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if hostCheck != nil && !hostCheck(r.Host) {
			http.Error(w, "driftless ui answers only to the address it serves on; open it by that address", http.StatusMisdirectedRequest)
			return
		}
		if r.ContentLength > maxBody {
			tooLarge(w)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter) {
	http.Error(w, fmt.Sprintf("refused: the request's body is longer than %d KiB, and the dashboard's forms are a few fields", maxBody>>10),
		http.StatusRequestEntityTooLarge)
}

// postForm is r's URL-encoded form (a multipart body is never parsed: it
// could spill to disk). When the body is too long or not a form, it
// answers r itself (413, 400) and returns false.
func postForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if err := r.ParseForm(); err != nil {
		var long *http.MaxBytesError
		if errors.As(err, &long) {
			tooLarge(w)
		} else {
			http.Error(w, "read the form: "+err.Error(), http.StatusBadRequest)
		}
		return nil, false
	}
	return r.PostForm, true
}

// LoopbackHosts accepts a Host header that names a loopback address
// (127.0.0.1, [::1]) or localhost, on port.
func LoopbackHosts(port string) func(string) bool {
	return func(host string) bool {
		h, p, err := net.SplitHostPort(host)
		if err != nil || p != port {
			return false
		}
		if strings.EqualFold(h, "localhost") {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
}

// IsLoopback reports whether address (host:port) listens on loopback
// only: 127.0.0.0/8, ::1 or localhost.
func IsLoopback(address string) bool {
	h, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) cluster(name string) *clusterState {
	for _, c := range s.clusters {
		if c.name == name {
			return c
		}
	}
	return nil
}

// render writes the page named page with data, or a plain error.
func (s *Server) render(w http.ResponseWriter, page string, status int, data any) {
	var b strings.Builder
	if err := s.pages[page].ExecuteTemplate(&b, "layout", data); err != nil {
		http.Error(w, "render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fragment renders the live region of page with data.
func (s *Server) fragment(page string, data any) (string, error) {
	var b strings.Builder
	err := s.pages[page].ExecuteTemplate(&b, "live", data)
	return b.String(), err
}

// NewLocalToken makes the secret of the URL `driftless ui` prints
// (Options.LocalToken).
func NewLocalToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make the dashboard's token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
