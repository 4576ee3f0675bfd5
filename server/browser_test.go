package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/server"
)

// TestBrowserRequestsRefused: a request a web page made (an Origin
// header, or a Sec-Fetch-Site other than none) is refused with 403 before
// it reaches any endpoint, the diagnostic ones included: a page cannot
// append forged messages to a run through a visitor's browser, nor read
// answers after rebinding its name to the sidecar's address. An agent's
// client, which sends neither header, and an address typed in a
// browser's bar (Sec-Fetch-Site: none) are answered as before.
func TestBrowserRequestsRefused(t *testing.T) {
	rs := start(t, testReg(t))
	run := []byte(`{"offset": 0, "messages": ` + testHistory + `}`)
	for _, h := range [][]string{
		{"Origin", "https://evil.example", "Content-Type", "text/plain"},
		{"Origin", "null"},
		{"Origin", rs.url},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Sec-Fetch-Site", "same-origin"},
	} {
		status, out := rs.post(t, "/v1/runs/forged/decide", run, h...)
		require.Equal(t, http.StatusForbidden, status, "%v: %s", h, out)
		e := decodeError(t, out).Error
		require.Equal(t, server.CodeBrowser, e.Code, h)
		require.Contains(t, e.Message, h[0], h)
		for _, path := range []string{"/health", "/metrics"} {
			status, _ = rs.do(t, http.MethodGet, path, nil, h...)
			require.Equal(t, http.StatusForbidden, status, "%s %v", path, h)
			rec := serveDiagnostic(rs.srv, http.MethodGet, path, h...)
			require.Equal(t, http.StatusForbidden, rec, "diagnostic %s %v", path, h)
		}
	}
	// Nothing reached the run: it does not exist.
	status, out := rs.post(t, "/v1/runs/forged/decide", []byte(`{"offset": 2, "messages": []}`))
	require.Equal(t, http.StatusConflict, status, string(out))

	status, out = rs.post(t, "/v1/runs/forged/decide", run)
	require.Equal(t, http.StatusOK, status, string(out))
	status, _ = rs.do(t, http.MethodGet, "/health", nil, "Sec-Fetch-Site", "none")
	require.Equal(t, http.StatusOK, status)
	_, metrics := rs.do(t, http.MethodGet, "/metrics", nil)
	require.Contains(t, string(metrics), `policycheck_http_requests_total{code="403",route="browser"}`)
}

// serveDiagnostic answers one request through srv's diagnostic handler
// and returns its status.
func serveDiagnostic(srv *server.Server, method, path string, header ...string) int {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	srv.DiagnosticHandler().ServeHTTP(rec, req)
	return rec.Code
}
