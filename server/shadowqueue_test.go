package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// slowCandidate is a shadow policy that takes a while over every
// decision (a million comparisons that find nothing) and changes none.
const slowCandidate = `package policycheck.rules.slow

hide contains "nothing_at_all" if {
	r := numbers.range(1, 150)
	found := [i | some i in r; some j in r; i == j + 5000 + input.context.n]
	count(found) > 0
}
`

// writeSlowCandidate writes slowCandidate to a file of the test's.
func writeSlowCandidate(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slow.rego")
	require.NoError(t, os.WriteFile(path, []byte(slowCandidate), 0o600))
	return path
}

// shadowDropped is policycheck_shadow_dropped_total over its reasons.
func shadowDropped(t *testing.T, rs *running) float64 {
	t.Helper()
	var n float64
	for _, r := range []string{"queue_full", "queue_bytes", "shutdown"} {
		n += metricValue(t, rs, `policycheck_shadow_dropped_total{reason="`+r+`"}`)
	}
	return n
}

// contextBody is a /v1/decide body of the test history whose context
// makes it a decision of its own (the decision memo does not answer it),
// padded to about size bytes.
func contextBody(n, size int) []byte {
	pad := ""
	if size > 0 {
		pad = strings.Repeat("x", size)
	}
	return []byte(fmt.Sprintf(`{"history": %s, "context": {"n": %d, "pad": %q}}`, testHistory, n, pad))
}

// TestServeShutdownWithinGraceWithShadowQueue is issue 29's third item: a
// serve process with a shadow policy and decisions queued for it exits
// within --shutdown-grace of SIGTERM (it drained the whole queue first,
// 18 s after SIGTERM with a grace of 1 s), with exit status 0.
func TestServeShutdownWithinGraceWithShadowQueue(t *testing.T) {
	bin, reg, _ := exampleServe(t)
	const grace = time.Second
	p := servetest.Start(t, bin, "--registry", reg, "--shadow-policy", writeSlowCandidate(t), "--shutdown-grace", grace.String())
	rs := processRunning(t, p)
	const sent = 40
	for i := range sent {
		status, out := rs.post(t, "/v1/decide", contextBody(i, 0))
		require.Equal(t, http.StatusOK, status, string(out))
	}
	// The queue holds decisions the shadow has not decided yet, more
	// than the grace leaves time for.
	require.Less(t, metricValue(t, rs, "policycheck_shadow_decisions_total"), float64(sent/2))
	rs.client.CloseIdleConnections()
	took, err := p.Terminate(20 * grace)
	require.NoError(t, err, "serve exits 0 on SIGTERM")
	t.Logf("serve stopped %v after SIGTERM (--shutdown-grace %v)", took, grace)
	require.Less(t, took, 3*grace+2*time.Second, "serve took %v to stop after SIGTERM with --shutdown-grace %v", took, grace)
}

// TestShutdownDropsQueuedShadowDecisions: shutdown gives the shadow queue
// what is left of the grace; the decisions still queued then are
// dropped and counted in /metrics (reason shutdown), so that every
// decision is either shadowed or counted as dropped.
func TestShutdownDropsQueuedShadowDecisions(t *testing.T) {
	rs := start(t, testReg(t), withShadow(writeSlowCandidate(t)), withShutdownGrace(200*time.Millisecond))
	const sent = 30
	for i := range sent {
		status, out := rs.post(t, "/v1/decide", contextBody(i, 0))
		require.Equal(t, http.StatusOK, status, string(out))
	}
	rs.stop()
	rec := httptest.NewRecorder()
	rs.srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics := rec.Body.String()
	value := func(sample string) float64 {
		for _, l := range strings.Split(metrics, "\n") {
			if rest, ok := strings.CutPrefix(l, sample+" "); ok {
				var v float64
				_, err := fmt.Sscan(rest, &v)
				require.NoError(t, err)
				return v
			}
		}
		t.Fatalf("%s not in /metrics:\n%s", sample, metrics)
		return 0
	}
	dropped := value(`policycheck_shadow_dropped_total{reason="shutdown"}`)
	require.Positive(t, dropped, "decisions were still queued at shutdown")
	require.Equal(t, float64(sent), value("policycheck_shadow_decisions_total")+dropped, "each decision shadowed or counted as dropped")
	require.Zero(t, value("policycheck_shadow_queue_bytes"))
}

// TestShadowQueueBoundedByBytes is issue 29's fourth item: the decisions
// waiting for the shadow policy are bounded by the bytes of their
// requests (ShadowQueueBytes, serve --shadow-queue-bytes), not only by
// their count: past the bound a decision is not shadowed, is counted in
// /metrics (reason queue_bytes), and its answer is the same.
func TestShadowQueueBoundedByBytes(t *testing.T) {
	const size, bound = 100 << 10, 350 << 10
	rs := start(t, testReg(t), withShadow(writeSlowCandidate(t)), withShadowQueueBytes(bound), withShutdownGrace(0))
	const sent = 20
	var want []string
	for i := range sent {
		status, out := rs.post(t, "/v1/decide", contextBody(i, size))
		require.Equal(t, http.StatusOK, status, string(out))
		var d engine.Decision
		require.NoError(t, json.Unmarshal(out, &d))
		if want == nil {
			want = d.Available
		}
		require.Equal(t, want, d.Available)
		require.LessOrEqual(t, metricValue(t, rs, "policycheck_shadow_queue_bytes"), float64(bound), "after request %d", i)
	}
	require.Positive(t, metricValue(t, rs, `policycheck_shadow_dropped_total{reason="queue_bytes"}`))
	require.Zero(t, metricValue(t, rs, `policycheck_shadow_dropped_total{reason="queue_full"}`))

	// One decision of any size is let into an empty queue.
	candidate := filepath.Join(t.TempDir(), "candidate.rego")
	require.NoError(t, os.WriteFile(candidate, []byte(shadowCandidate), 0o600))
	big := start(t, testReg(t), withShadow(candidate), withShadowQueueBytes(1000))
	status, out := big.post(t, "/v1/decide", contextBody(0, size))
	require.Equal(t, http.StatusOK, status, string(out))
	require.Eventually(t, func() bool { return metricValue(t, big, "policycheck_shadow_decisions_total") == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Zero(t, shadowDropped(t, big))
}
