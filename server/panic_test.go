package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/ground/faults"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// panicOnce panics at point the first time it is reached after arm.
type panicOnce struct{ armed atomic.Value }

func (p *panicOnce) arm(point string) { p.armed.Store(point) }

func (p *panicOnce) at(point string) {
	if p.armed.CompareAndSwap(point, "") {
		panic("injected at " + point)
	}
}

const panicRegistry = `tools:
  - name: get_time
  - name: issue_refund
`

func panicMessages(part string) string {
	return `[{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "issue_refund", "tool_call_id": "` + part + `", "args": {"amount": 10}}]}]`
}

// TestPanicOnTheDecisionPath: a panic anywhere on a decision's path
// (issue 43, item 2) is recovered. Inside the engine's decision, on
// /v1/decide and on a run step, the answer is a decision failed closed
// that says why; outside it, in a run step before its decision, the
// answer is a 500 and the run is left as it was, so the client's retry of
// the same step at the same offset is accepted (not 409). Each is counted
// in policycheck_recovered_panics_total. On main, the trigger (an
// amount of 1e10000000 against a minimum) dropped the connection with no
// answer, and the retry got 409.
func TestPanicOnTheDecisionPath(t *testing.T) {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(panicRegistry))
	require.NoError(t, err)
	var p panicOnce
	p.arm("")
	rs := start(t, withRegistry(reg), func(c *server.Config) { server.Faults(c, p.at) })

	// /v1/decide: the engine recovers, the decision fails closed.
	p.arm(faults.EngineDecide)
	history := `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "refund"}]}, ` + panicMessages("c1")[1:]
	status, out := rs.post(t, "/v1/decide", []byte(`{"history": `+history+`}`))
	require.Equal(t, http.StatusOK, status, string(out))
	var d engine.Decision
	require.NoError(t, json.Unmarshal(out, &d))
	require.Len(t, d.Errors, 1)
	assert.Contains(t, d.Errors[0], "internal error: the engine panicked while deciding, so the decision fails closed")
	assert.Contains(t, d.Errors[0], "injected at engine.decide")
	assert.Empty(t, d.Available)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
	assert.Equal(t, 1.0, metricValue(t, rs, `policycheck_recovered_panics_total{endpoint="decide"}`))
	assert.Equal(t, 1.0, metricValue(t, rs, `policycheck_fail_closed_decisions_total{endpoint="decide"}`))

	step := func(offset int, msgs string) (int, []byte) {
		return rs.post(t, "/v1/runs/panicky/decide", []byte(fmt.Sprintf(`{"offset": %d, "messages": %s}`, offset, msgs)))
	}
	status, out = step(0, `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "refund"}]}]`)
	require.Equal(t, http.StatusOK, status, string(out))

	// A run step that panics before its decision: 500, the run unchanged.
	p.arm(faults.RunStep)
	status, out = step(1, panicMessages("c2"))
	require.Equal(t, http.StatusInternalServerError, status, string(out))
	assert.Contains(t, string(out), "nothing was decided and a run is as it was")
	assert.Equal(t, 1.0, metricValue(t, rs, `policycheck_recovered_panics_total{endpoint="run_decide"}`))
	status, out = step(1, panicMessages("c2"))
	require.Equal(t, http.StatusOK, status, "the retry of the step at the same offset is accepted: %s", out)
	var sd struct {
		engine.Decision
		Retries []engine.Retry `json:"retries"`
	}
	require.NoError(t, json.Unmarshal(out, &sd))
	require.Len(t, sd.Calls, 1)
	assert.Equal(t, engine.Execute, sd.Calls[0].Verdict)
	assert.Empty(t, sd.Errors)

	// A run step whose decision panics: a fail-closed decision, counted.
	p.arm(faults.EngineDecide)
	status, out = step(2, `[{"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "issue_refund", "tool_call_id": "c2", "content": "ok"}]}]`)
	require.Equal(t, http.StatusOK, status, string(out))
	sd.Errors = nil
	require.NoError(t, json.Unmarshal(out, &sd))
	require.Len(t, sd.Errors, 1)
	assert.Contains(t, sd.Errors[0], "injected at engine.decide")
	assert.Equal(t, 2.0, metricValue(t, rs, `policycheck_recovered_panics_total{endpoint="run_decide"}`))
	status, out = step(3, panicMessages("c3"))
	require.Equal(t, http.StatusOK, status, "the run goes on after a fail-closed step: %s", out)

	// A run step that fails after its decision, while the sidecar signs
	// its receipts: 500, and the run does not record the step (it was
	// recorded before the receipts were signed, and the retry got 409).
	p.arm(faults.ServerStamp)
	ret := `[{"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "issue_refund", "tool_call_id": "c3", "content": "ok"}]}]`
	status, out = step(4, ret)
	require.Equal(t, http.StatusInternalServerError, status, string(out))
	assert.Equal(t, 3.0, metricValue(t, rs, `policycheck_recovered_panics_total{endpoint="run_decide"}`))
	status, out = step(4, ret)
	require.Equal(t, http.StatusOK, status, "the retry of a step whose receipts could not be signed is accepted: %s", out)
}
