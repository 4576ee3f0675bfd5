package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/policycheck/policycheck/server/internal/httpreq"
)

// authenticate requires the bearer token, when one is configured, on
// every request but GET /health (probes carry no credentials). The
// comparison takes constant time.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.Token))
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

// refuseBrowsers refuses, with 403, a request a web page made
// (httpreq.FromWebPage): without a token (the loopback default) nothing
// else would stop a page from appending forged messages to a run through
// a visitor's browser.
func (s *Server) refuseBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if no := httpreq.FromWebPage(r.Header); no != nil {
			s.metrics.request("browser", http.StatusForbidden)
			writeError(w, &Error{Status: http.StatusForbidden, Code: CodeBrowser, Message: no.Msg})
			return
		}
		next.ServeHTTP(w, r)
	})
}
