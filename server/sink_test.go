package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/syncbuf"
)

// TestDecisionLogDropsCountedByEvent is issue 29's eighth item for
// decision logs: with a decision-log service that fails and a small
// buffer, every event is either delivered once the service is back or
// counted as dropped, once, under its one reason (the metric counted
// drop occurrences, under two reasons at once: 5,000 decisions gave 7 and
// 7); /health says the sink is degraded while uploads fail and events are
// dropped, and ok again after an upload that succeeds.
func TestDecisionLogDropsCountedByEvent(t *testing.T) {
	col := newCollector(t)
	var down atomic.Bool
	down.Store(true)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		col.Config.Handler.ServeHTTP(w, r)
	}))
	defer sink.Close()
	config := "services:\n  logs:\n    url: " + sink.URL + "\ndecision_logs:\n  service: logs\n  reporting:\n    trigger: manual\n" +
		"    buffer_size_limit_bytes: 8000\n    upload_size_limit_bytes: 2000\n"
	rs := start(t, testReg(t), withOPAConfig([]byte(config), "sink"))
	lp := logs.Lookup(rs.srv.Manager())

	_, h := health(t, rs)
	require.Equal(t, "ok", h.Status)
	require.NotNil(t, h.DecisionLogs)
	require.Equal(t, "ok", h.DecisionLogs.State)

	const sent = 400
	for i := range sent {
		status, out := rs.post(t, "/v1/decide", contextBody(i, 200))
		require.Equal(t, http.StatusOK, status, string(out))
	}
	require.Error(t, lp.Trigger(context.Background()), "the log service is down")
	dropped := logMetric(t, rs, "policycheck_decision_log_dropped_total", `reason="buffer_bytes"`)
	require.Positive(t, dropped, "an 8,000-byte buffer does not hold %d events", sent)
	require.Zero(t, logMetric(t, rs, "policycheck_decision_log_dropped_total", `reason="buffer_events"`), "counted under one reason")
	require.Zero(t, metricValue(t, rs, "policycheck_decision_log_dropped_chunks_total"), "OPA's buffer never had to drop a chunk")
	status, h := health(t, rs)
	require.Equal(t, http.StatusOK, status, "decisions are still made")
	require.Equal(t, "degraded", h.Status)
	require.Equal(t, "degraded", h.DecisionLogs.State)
	require.EqualValues(t, dropped, h.DecisionLogs.Dropped)
	require.Contains(t, h.DecisionLogs.Message, "failed")

	// The service is back: what was kept is delivered, and with what was
	// dropped makes every decision.
	down.Store(false)
	require.NoError(t, lp.Trigger(context.Background()))
	col.mu.Lock()
	delivered := len(col.events)
	col.mu.Unlock()
	require.Positive(t, delivered)
	require.Equal(t, sent, delivered+int(dropped), "each event delivered or counted as dropped, once")
	_, h = health(t, rs)
	require.Equal(t, "ok", h.Status)
	require.Equal(t, "ok", h.DecisionLogs.State)
	require.Zero(t, h.DecisionLogs.Dropped)
}

// TestBundleServerThatStopsAnswering is issue 29's eighth item for
// bundles: a bundle server that stops answering (it sends its headers,
// then nothing) shows in /health (stale, degraded), in /metrics
// (policycheck_bundle_stale) and in a warning once no download has
// succeeded for three times the bundle's polling bound, while the last
// good revision keeps serving; once it answers again, it is no longer
// stale.
func TestBundleServerThatStopsAnswering(t *testing.T) {
	bs := newBundleServer(t)
	bs.publish(t, "r1", map[string]string{"/vault.rego": filterKeeping("secret_op")})
	var hang atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	unhang := func() { once.Do(func() { hang.Store(false); close(release) }) }
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			w.Header().Set("Content-Type", "application/gzip")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		bs.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	t.Cleanup(unhang)
	config := "services:\n  bundles:\n    url: " + front.URL + "\nbundles:\n  pc:\n    service: bundles\n    resource: /bundles/pc.tar.gz\n" +
		"    polling:\n      min_delay_seconds: 1\n      max_delay_seconds: 1\n"
	var logged syncbuf.Buffer // what the server logs, safe for its goroutines
	rs := start(t, testReg(t), withOPAConfig([]byte(config), "stale"), withLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.Eventually(t, func() bool { s, _ := health(t, rs); return s == http.StatusOK }, 10*time.Second, 20*time.Millisecond)
	_, h := health(t, rs)
	require.Equal(t, "ok", h.Status)
	require.False(t, h.Bundles["pc"].Stale)

	hang.Store(true)
	require.Eventually(t, func() bool { _, h := health(t, rs); return h.Bundles["pc"].Stale }, 15*time.Second, 50*time.Millisecond,
		"a bundle server that stopped answering shows in /health")
	status, h := health(t, rs)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "degraded", h.Status)
	require.Equal(t, "r1", h.Bundles["pc"].Serving, "the last good revision keeps serving")
	require.Contains(t, h.Bundles["pc"].Error, "has not answered since")
	require.NotEmpty(t, h.Bundles["pc"].LastSuccess)
	require.Equal(t, 1.0, metricValue(t, rs, `policycheck_bundle_stale{bundle="pc"}`))
	require.Contains(t, logged.String(), "bundle server not answering")
	status, d, out := decide(t, rs, "")
	require.Equal(t, http.StatusOK, status, string(out))
	require.Equal(t, []string{"get_time", "secret_op"}, d.Available)

	unhang()
	require.Eventually(t, func() bool { _, h := health(t, rs); return !h.Bundles["pc"].Stale }, 15*time.Second, 50*time.Millisecond)
	require.Zero(t, metricValue(t, rs, `policycheck_bundle_stale{bundle="pc"}`))
	require.True(t, strings.Contains(logged.String(), "bundle server answering again"), logged.String())
}
