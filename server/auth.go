package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
)

// authenticate requires the bearer token, when one is configured, on
// every request but GET /health (probes carry no credentials). The
// comparison takes constant time.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		scheme, token, ok := strings.Cut(auth, " ")
		// Hashing first makes the comparison independent of the length
		// of what the client sent.
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="policycheck"`)
			s.metrics.request("unauthorized", http.StatusUnauthorized)
			writeError(w, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
				Message: "a valid bearer token is required (Authorization: Bearer <token>)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseBrowsers refuses, with 403, a request a web page made: one that
// carries an Origin header, or a Sec-Fetch-Site other than "none" (an
// address typed in the browser's own bar). The sidecar serves agents,
// whose HTTP clients send neither; a page on any site, though, may make
// a browser on the sidecar's host post to it (a form, or fetch with a
// text/plain body, needs no CORS preflight) and so append forged messages
// to a run, and a page whose name is made to resolve to 127.0.0.1 (DNS
// rebinding) may read its answers. Without a token (the loopback default)
// nothing else would stop either.
func (s *Server) refuseBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		site := r.Header.Get("Sec-Fetch-Site")
		if origin == "" && (site == "" || site == "none") {
			next.ServeHTTP(w, r)
			return
		}
		what := "Origin " + strconv.Quote(origin)
		if origin == "" {
			what = "Sec-Fetch-Site " + strconv.Quote(site)
		}
		s.metrics.request("browser", http.StatusForbidden)
		writeError(w, &Error{Status: http.StatusForbidden, Code: CodeBrowser,
			Message: "a request made by a web page is refused (it came with " + what + "): the sidecar answers agents' HTTP clients, which send neither Origin nor Sec-Fetch-Site"})
	})
}
