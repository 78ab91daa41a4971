package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
)

// localSession is the value of the local mode's session cookie: derived
// from the token of the printed URL, so the cookie does not hold the
// token itself.
func localSession(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("driftless ui session"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// localCookie is the session cookie's name for the port r was sent to:
// a browser sends a cookie to every port of a host, and each `driftless
// ui` has a token of its own.
func localCookie(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		return "driftless-ui-" + port
	}
	return "driftless-ui"
}

// localGate serves, in the local mode, only whoever has the URL `driftless
// ui` printed (other users of a shared machine can reach its loopback
// port too): that URL's token sets an HttpOnly, SameSite=Strict session
// cookie and is dropped from the address (a redirect); every other
// request must carry that cookie, or is refused with 401.
func (s *Server) localGate(next http.Handler) http.Handler {
	session := localSession(s.opts.LocalToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if token := q.Get("token"); token != "" {
			if !hmac.Equal([]byte(token), []byte(s.opts.LocalToken)) {
				http.Error(w, "refused: this is not the token of this dashboard; open the address driftless ui printed", http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: localCookie(r), Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if ck, err := r.Cookie(localCookie(r)); err == nil && hmac.Equal([]byte(ck.Value), []byte(session)) {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, "open the address driftless ui printed, with its ?token=: the dashboard serves only whoever started it", http.StatusUnauthorized)
	})
}
