package server_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestDecisionLogBufferTooSmallForItsUploads (issue 43, item 7): the
// server keeps two upload chunks free in OPA's size buffer, so a
// buffer_size_limit_bytes under three times upload_size_limit_bytes
// (50,000 bytes with OPA's default 32,768-byte uploads) would drop every
// event with a healthy sink, forever: serve refuses it at start, exit 2,
// naming the file and the key. A configuration that sets a large upload
// size and no buffer bound gets a bound that holds its uploads, and an
// event into an empty buffer is delivered.
func TestDecisionLogBufferTooSmallForItsUploads(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		note, reporting, want string
	}{
		{"OPA's default upload size", "    buffer_size_limit_bytes: 50000\n",
			"/decision_logs/reporting/buffer_size_limit_bytes: 50000 bytes is less than three times upload_size_limit_bytes (32768, OPA's default)"},
		{"an upload size set", "    buffer_size_limit_bytes: 5999\n    upload_size_limit_bytes: 2000\n",
			"/decision_logs/reporting/buffer_size_limit_bytes: 5999 bytes is less than three times upload_size_limit_bytes (2000)"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			file := filepath.Join(dir, "opa.yaml")
			require.NoError(t, os.WriteFile(file, []byte("services:\n  logs:\n    url: http://127.0.0.1:9\n"+
				"decision_logs:\n  service: logs\n  reporting:\n"+tc.reporting), 0o600))
			var stdout, stderr bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- cli.Run([]string{"serve", "--addr", "127.0.0.1:0", "--config", file}, nil, &stdout, &stderr)
			}()
			var code int
			select {
			case code = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("serve took the configuration and is serving")
			}
			require.Equal(t, cli.ExitBadUsage, code, stderr.String())
			require.Contains(t, stderr.String(), "--config "+file+": ")
			require.Contains(t, stderr.String(), tc.want)
		})
	}

	// The smallest buffer accepted, and a large upload size with no
	// buffer bound: every event reaches a healthy sink.
	for _, reporting := range []string{
		"    buffer_size_limit_bytes: 6000\n    upload_size_limit_bytes: 2000\n",
		"    upload_size_limit_bytes: 20000000\n",
	} {
		col := newCollector(t)
		sink := httptest.NewServer(col.Config.Handler)
		config := "services:\n  logs:\n    url: " + sink.URL + "\ndecision_logs:\n  service: logs\n  reporting:\n    trigger: manual\n" + reporting
		rs := start(t, testReg(t), withOPAConfig([]byte(config), "room"))
		lp := logs.Lookup(rs.srv.Manager())
		const sent = 3
		for i := range sent {
			status, out := rs.post(t, "/v1/decide", contextBody(i, 20))
			require.Equal(t, http.StatusOK, status, string(out))
			require.NoError(t, lp.Trigger(context.Background()), reporting)
		}
		col.mu.Lock()
		delivered := len(col.events)
		col.mu.Unlock()
		require.Equal(t, sent, delivered, "%s: each event, logged into an empty buffer, is delivered", reporting)
		require.Zero(t, logMetric(t, rs, "policycheck_decision_log_dropped_total", `reason="buffer_bytes"`), reporting)
		sink.Close()
	}
}
