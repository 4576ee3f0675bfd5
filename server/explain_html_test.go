package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/output/explainpage"
	"github.com/policycheck/policycheck/server"
)

// TestExplainHTMLSameAsCLI: /v1/explain with Accept: text/html answers,
// for every shipped history, the page policycheck explain --format html
// prints, byte for byte, as a page the browser may not run scripts in
// or sniff.
func TestExplainHTMLSameAsCLI(t *testing.T) {
	examples := filepath.Join(conformance.ModuleRoot(), "examples")
	regFile := filepath.Join(examples, "registry.yaml")
	reg, err := os.ReadFile(regFile)
	require.NoError(t, err)
	histories, err := filepath.Glob(filepath.Join(examples, "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, histories)
	rs := start(t)
	for _, h := range histories {
		hist, err := os.ReadFile(h)
		require.NoError(t, err)
		var stdout, stderr bytes.Buffer
		code := cli.Run([]string{"explain", "--registry", regFile, "--history", h, "--format", "html"}, nil, &stdout, &stderr)
		require.Equal(t, 0, code, "%s: %s", h, stderr.String())
		body := mustJSON(t, map[string]any{"registry": string(reg), "history": json.RawMessage(hist)})
		resp := rs.doResp(t, body, "Accept", "text/html")
		require.Equal(t, http.StatusOK, resp.status, "%s: %s", h, resp.body)
		require.Equal(t, "text/html; charset=utf-8", resp.header.Get("Content-Type"))
		require.Equal(t, explainpage.CSP, resp.header.Get("Content-Security-Policy"))
		require.Equal(t, "nosniff", resp.header.Get("X-Content-Type-Options"))
		require.Equal(t, stdout.String(), string(resp.body), h)
	}
}

// TestExplainAccept: /v1/explain answers JSON unless the Accept header
// prefers HTML, and refuses (406, not_acceptable) an Accept header that
// accepts neither or does not parse.
func TestExplainAccept(t *testing.T) {
	rs := start(t, testReg(t))
	body := []byte(`{"history": ` + testHistory + `}`)
	for _, tc := range []struct {
		accept string
		want   string // the Content-Type, or "406"
	}{
		{"", "application/json"},
		{"*/*", "application/json"},
		{"application/json", "application/json"},
		{"text/html", "text/html; charset=utf-8"},
		{"text/*", "text/html; charset=utf-8"},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html; charset=utf-8"},
		{"text/html;q=0.5, application/json", "application/json"},
		{"application/json;q=0.1, text/html;q=0.2", "text/html; charset=utf-8"},
		{"application/xml", "406"},
		{"text/html;q=0, application/json;q=0", "406"},
		{"text/html;q=2", "406"},
		{"text/html;q=high", "406"},
		{"html", "406"},
	} {
		var hdr []string
		if tc.accept != "" {
			hdr = []string{"Accept", tc.accept}
		}
		resp := rs.doResp(t, body, hdr...)
		if tc.want == "406" {
			require.Equal(t, http.StatusNotAcceptable, resp.status, "Accept %q: %s", tc.accept, resp.body)
			e := decodeError(t, resp.body)
			require.Equal(t, server.CodeNotAcceptable, e.Error.Code, tc.accept)
			require.Contains(t, e.Error.Message, "Accept", tc.accept)
			continue
		}
		require.Equal(t, http.StatusOK, resp.status, "Accept %q: %s", tc.accept, resp.body)
		require.Equal(t, tc.want, resp.header.Get("Content-Type"), "Accept %q", tc.accept)
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// doResp posts body to /v1/explain with the header pairs given.
func (rs *running) doResp(t testing.TB, body []byte, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, rs.url+"/v1/explain", bytes.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rs.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, buf.Bytes()}
}
