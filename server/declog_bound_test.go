package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/server"
)

// logMetric reads one decision-log counter from /metrics.
func logMetric(t *testing.T, rs *running, name, label string) float64 {
	t.Helper()
	_, body := rs.do(t, http.MethodGet, "/metrics", nil)
	m := regexp.MustCompile(`(?m)^` + name + `\{` + label + `\} (\S+)$`).FindSubmatch(body)
	require.NotNil(t, m, "%s{%s} not in /metrics:\n%s", name, label, body)
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// TestDecisionLogBufferBounded: a decision-log configuration without a
// bound gets one; upload failures and dropped events are counted in
// /metrics; /health reports the plugin's state.
func TestDecisionLogBufferBounded(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	config := func(reporting string) []byte {
		return []byte("services:\n  logs:\n    url: " + down.URL + "\ndecision_logs:\n  service: logs\n  reporting:\n    trigger: manual\n" + reporting)
	}
	body := []byte(`{"history": ` + testHistory + `}`)

	rs := start(t, testReg(t), withOPAConfig(config(""), "bound"))
	lp := logs.Lookup(rs.srv.Manager())
	require.NotNil(t, lp)
	limit := lp.Config().Reporting.BufferSizeLimitBytes
	require.NotNil(t, limit)
	require.Equal(t, int64(32<<20), *limit, "the default configuration's buffer is bounded")
	for range 3 {
		status, out := rs.post(t, "/v1/decide", body)
		require.Equal(t, 200, status, string(out))
	}
	require.Error(t, lp.Trigger(context.Background()), "the log service is down")
	require.GreaterOrEqual(t, logMetric(t, rs, "policycheck_decision_log_uploads_total", `result="failed"`), 1.0)
	require.Equal(t, 0.0, logMetric(t, rs, "policycheck_decision_log_dropped_total", `reason="buffer_bytes"`))
	_, h := rs.do(t, http.MethodGet, "/health", nil)
	var health server.Health
	require.NoError(t, json.Unmarshal(h, &health))
	require.Contains(t, health.Plugins, "decision_logs", string(h))
	require.NotEmpty(t, health.Plugins["decision_logs"].State)

	// A bound the configuration sets is kept; events over it are
	// dropped and counted. (A bound under three upload chunks is refused:
	// TestDecisionLogBufferTooSmallForItsUploads.)
	tiny := start(t, testReg(t), withOPAConfig(config("    buffer_size_limit_bytes: 3000\n    upload_size_limit_bytes: 1000\n"), "tiny"))
	require.Equal(t, int64(3000), *logs.Lookup(tiny.srv.Manager()).Config().Reporting.BufferSizeLimitBytes)
	for range 60 {
		status, out := tiny.post(t, "/v1/decide", body)
		require.Equal(t, 200, status, string(out))
	}
	// Chunks reach the buffer when the encoder flushes them: at the
	// upload size, or when an upload is triggered.
	_ = logs.Lookup(tiny.srv.Manager()).Trigger(context.Background())
	require.GreaterOrEqual(t, logMetric(t, tiny, "policycheck_decision_log_dropped_total", `reason="buffer_bytes"`), 1.0)
}
