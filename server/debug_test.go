package server_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestDebugHandlerIsServedBehindTheToken: a Debug handler answers the
// paths under /debug/, whole, only with the bearer token; without the
// option, /debug/ is not found.
func TestDebugHandlerIsServedBehindTheToken(t *testing.T) {
	dbg := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "debug "+r.URL.Path) })
	rs := start(t, testReg(t), withToken("s3cret"), withDebug(dbg))
	code, _ := rs.do(t, http.MethodGet, "/debug/pprof/", nil)
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := rs.do(t, http.MethodGet, "/debug/pprof/heap", nil, "Authorization", "Bearer s3cret")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "debug /debug/pprof/heap", string(body))

	plain := start(t, testReg(t))
	code, _ = plain.do(t, http.MethodGet, "/debug/pprof/", nil)
	require.Equal(t, http.StatusNotFound, code)
}

// TestServePprof: policycheck serve --pprof serves Go's profiles behind
// its token, a CPU profile among them (gzipped protobuf, as go tool pprof
// reads it); without --pprof there are none.
func TestServePprof(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := servetest.Build(t)
	tok := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tok, []byte("s3cret\n"), 0o600))
	reg := filepath.Join("..", "examples", "registry.yaml")

	p := servetest.Start(t, bin, "--registry", reg, "--pprof", "--token-file", tok)
	rs := processRunning(t, p)
	auth := []string{"Authorization", "Bearer s3cret"}
	code, _ := rs.do(t, http.MethodGet, "/debug/pprof/", nil)
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := rs.do(t, http.MethodGet, "/debug/pprof/", nil, auth...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), "goroutine")
	code, body = rs.do(t, http.MethodGet, "/debug/pprof/profile?seconds=1", nil, auth...)
	require.Equal(t, http.StatusOK, code)
	require.True(t, bytes.HasPrefix(body, []byte{0x1f, 0x8b}), "a CPU profile is gzipped: %q", body[:min(len(body), 64)])
	p.Stop()

	off := servetest.Start(t, bin, "--registry", reg)
	code, _ = processRunning(t, off).do(t, http.MethodGet, "/debug/pprof/", nil)
	require.Equal(t, http.StatusNotFound, code)
}
