package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/output/replay"
	"github.com/policycheck/policycheck/loader"
)

// shadowCandidate is the shadow policy's change: one deny rule and one
// hide rule.
const shadowCandidate = `package policycheck.rules.candidate

deny contains {"reason": "refund above 40", "message": "Refunds above 40 need a supervisor."} if {
	input.call.tool == "issue_refund"
	input.call.args.amount > 40
}

hide contains "search_docs"
`

// metricValue reads one sample of /metrics (0 when absent).
func metricValue(t *testing.T, rs *running, sample string) float64 {
	t.Helper()
	_, body := rs.do(t, http.MethodGet, "/metrics", nil)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

// TestShadowPolicyNeverChangesTheAnswer is issue 13's shadow "done
// means": the enforced answers are byte-identical with and without a
// shadow policy; the shadow's disagreements appear in /metrics by
// transition, exactly as many as deciding both policy sets directly
// finds, and in the decision log beside the enforced result.
func TestShadowPolicyNeverChangesTheAnswer(t *testing.T) {
	ctx := context.Background()
	examples := filepath.Join(conformance.ModuleRoot(), "examples")
	reg, err := loader.ReadRegistry(filepath.Join(examples, "registry.yaml"))
	require.NoError(t, err)
	policies := filepath.Join(examples, "policies")
	rule := filepath.Join(t.TempDir(), "candidate.rego")
	require.NoError(t, os.WriteFile(rule, []byte(shadowCandidate), 0o644))
	logCfg := func(url string) []byte {
		return []byte("services:\n  c:\n    url: " + url + "\ndecision_logs:\n  service: c\n  reporting:\n    trigger: manual\n")
	}
	plainCol, shadowCol := newCollector(t), newCollector(t)
	plain := start(t, withRegistry(reg), withEngine(engine.PolicyPaths(policies)), withOPAConfig(logCfg(plainCol.URL), "plain"))
	shadowed := start(t, withRegistry(reg), withEngine(engine.PolicyPaths(policies)), withOPAConfig(logCfg(shadowCol.URL), "shadowed"),
		withShadow(policies, rule))

	// The expected disagreements, from the two policy sets decided
	// directly.
	enforcedEng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths(policies))
	require.NoError(t, err)
	candidateEng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths(policies, rule))
	require.NoError(t, err)
	want := map[string]int{}
	total := 0

	ctxDoc := map[string]any{"group": "support"}
	files, _ := filepath.Glob(filepath.Join(examples, "histories", "*.json"))
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		msgs := splitHistory(t, raw)
		for i := 1; i <= len(msgs); i++ {
			body, _ := json.Marshal(map[string]any{"history": msgs[:i], "context": ctxDoc})
			s1, a := plain.post(t, "/v1/decide", body)
			s2, b := shadowed.post(t, "/v1/decide", body)
			require.Equal(t, http.StatusOK, s1, string(a))
			require.Equal(t, s1, s2)
			require.Equal(t, string(a), string(b), "the shadow changed the answer to %s[:%d]", filepath.Base(f), i)
			n++

			h, err := loader.DecodeHistory(f, mustJSONBytes(t, msgs[:i]), loader.DefaultLimits())
			require.NoError(t, err)
			req := engine.Request{History: h, Context: ctxDoc}
			de, err := enforcedEng.Decide(ctx, req)
			require.NoError(t, err)
			dc, err := candidateEng.Decide(ctx, req)
			require.NoError(t, err)
			for _, c := range replay.Compare("", i-1, de, dc) {
				want[fmt.Sprintf(`policycheck_shadow_disagreements_total{kind=%q,transition=%q}`, c.Kind, c.Transition)]++
				total++
			}
		}
	}
	require.NotEmpty(t, want)

	deadline := time.Now().Add(30 * time.Second)
	for metricValue(t, shadowed, "policycheck_shadow_decisions_total") < float64(n) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.EqualValues(t, n, metricValue(t, shadowed, "policycheck_shadow_decisions_total"))
	require.Zero(t, shadowDropped(t, shadowed))
	for sample, count := range want {
		require.EqualValues(t, count, metricValue(t, shadowed, sample), sample)
	}
	require.Zero(t, metricValue(t, plain, "policycheck_shadow_decisions_total"))

	// The decision log: every enforced decision once, its result the
	// enforced one, the shadow's differences beside it.
	require.NoError(t, logs.Lookup(plain.srv.Manager()).Trigger(ctx))
	require.NoError(t, logs.Lookup(shadowed.srv.Manager()).Trigger(ctx))
	plainCol.mu.Lock()
	plainEvents := plainCol.events
	plainCol.mu.Unlock()
	shadowCol.mu.Lock()
	events := shadowCol.events
	shadowCol.mu.Unlock()
	require.Len(t, events, n)
	require.Len(t, plainEvents, n)
	logged := 0
	for i, e := range events {
		sh := e["custom"].(map[string]any)["shadow"].(map[string]any)
		changes := sh["changes"].([]any)
		logged += len(changes)
		require.Equal(t, len(changes) == 0, sh["agrees"])
		require.Equal(t, plainEvents[i]["result"], e["result"], "the logged result is the enforced one")
		for _, c := range changes {
			c := c.(map[string]any)
			if c["kind"] == "call" {
				require.Contains(t, []any{"execute->denied", "execute->unknown_tool"}, c["transition"])
			}
		}
	}
	require.Equal(t, total, logged)
}

func mustJSONBytes(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
