package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/approvalcases"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

func approvalServer(t *testing.T) *running {
	t.Helper()
	reg, err := loader.ParseRegistry("registry.yaml", []byte(approvalcases.Registry))
	require.NoError(t, err)
	return start(t, withRegistry(reg), withEngine(engine.Modules(
		engine.Source{File: approvalcases.PolicyFile, Text: approvalcases.Policy})))
}

// TestApprovalBindingOverHTTP runs the approval table through the sidecar:
// /v1/decide, /v1/explain and a run's decide endpoint, with the approvals
// in the request body. No approval lets a call through unless it is bound
// to that very call, and the decision says why.
func TestApprovalBindingOverHTTP(t *testing.T) {
	rs := approvalServer(t)
	for i, tc := range approvalcases.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			decide := fmt.Sprintf(`{"history": %s, "approvals": %s}`, tc.History, tc.Approvals)
			run := fmt.Sprintf(`{"offset": 0, "messages": %s, "approvals": %s}`, tc.History, tc.Approvals)
			for _, ep := range []struct{ path, body string }{
				{"/v1/decide", decide},
				{fmt.Sprintf("/v1/runs/approvals-%d/decide", i), run},
				{"/v1/explain", decide},
			} {
				status, out := rs.post(t, ep.path, []byte(ep.body))
				require.Equal(t, http.StatusOK, status, "%s: %s", ep.path, out)
				d := decisionOf(t, ep.path, out)
				require.NotEmpty(t, d.Calls, ep.path)
				require.Len(t, d.Approvals, 1, "%s: the decision records the approval", ep.path)
				assert.Equal(t, tc.Applied, d.Approvals[0].Applied, "%s: %s", ep.path, d.Approvals[0].Why)
				assert.Contains(t, d.Approvals[0].Why, tc.Why, ep.path)
				for _, c := range d.Calls {
					assert.Equal(t, tc.Verdict, c.Verdict, "%s: %+v", ep.path, c)
					if tc.Message != "" {
						assert.Contains(t, c.Message, tc.Message, ep.path)
					}
				}
			}
		})
	}
}

// TestApprovalsBodyIsChecked refuses approvals of shapes the engine does
// not take with 400 and the JSON pointer into the body, on every endpoint
// that reads them; /v1/facts, which decides nothing, refuses any.
func TestApprovalsBodyIsChecked(t *testing.T) {
	rs := approvalServer(t)
	hist := string(approvalcases.Cases()[0].History)
	cases := []struct{ note, approvals, pointer string }{
		{"not an object", `[]`, "/approvals"},
		{"a bare true", `{"t2": true}`, "/approvals/t2"},
		{"no digest", `{"t2": {"kind": "tool-approved"}}`, "/approvals/t2"},
		{"a malformed digest", `{"t2": {"kind": "tool-approved", "digest": "sha256:12"}}`, "/approvals/t2/digest"},
		{"an unknown kind", `{"t2": {"kind": "ok", "digest": "sha256:` + strings.Repeat("0", 64) + `"}}`, "/approvals/t2/kind"},
		// encoding/json would read the id as "t\ufffd2": read as a
		// history is, it is refused.
		{"a lone surrogate escape in a call id", `{"t\udc002": {"kind": "tool-denied"}}`, "/approvals"},
		{"invalid UTF-8 in a message", "{\"t2\": {\"kind\": \"tool-denied\", \"message\": \"n\xffo\"}}", "/approvals/t2/message"},
		{"two approvals for one tool_call_id", `{"t2": {"kind": "tool-denied", "digest": "sha256:` + strings.Repeat("0", 64) + `"}, "t2": {"kind": "tool-approved", "digest": "sha256:` + strings.Repeat("0", 64) + `"}}`, "/approvals/t2"},
		{"a digest given twice", `{"t2": {"kind": "tool-approved", "digest": "sha256:` + strings.Repeat("0", 64) + `", "digest": "sha256:` + strings.Repeat("1", 64) + `"}}`, "/approvals/t2/digest"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			for _, ep := range []struct{ path, body string }{
				{"/v1/decide", `{"history": ` + hist + `, "approvals": ` + tc.approvals + `}`},
				{"/v1/explain", `{"history": ` + hist + `, "approvals": ` + tc.approvals + `}`},
				{"/v1/runs/bad-approvals/decide", `{"offset": 0, "messages": ` + hist + `, "approvals": ` + tc.approvals + `}`},
			} {
				status, out := rs.post(t, ep.path, []byte(ep.body))
				assert.Equal(t, http.StatusBadRequest, status, "%s: %s", ep.path, out)
				var e struct{ Error server.Error }
				require.NoError(t, json.Unmarshal(out, &e), string(out))
				assert.Equal(t, tc.pointer, e.Error.Pointer, "%s: %s", ep.path, e.Error.Message)
			}
		})
	}
	status, out := rs.post(t, "/v1/facts", []byte(`{"history": `+hist+`, "approvals": {}}`))
	assert.Equal(t, http.StatusBadRequest, status, string(out))
	assert.Contains(t, string(out), "/approvals")
}

// TestApprovalsInDecisionLogs sends a decision made with approvals to a
// decision-log collector: the logged result says who approved what, and
// whether each approval applied.
func TestApprovalsInDecisionLogs(t *testing.T) {
	ctx := t.Context()
	col := newCollector(t)
	reg, err := loader.ParseRegistry("registry.yaml", []byte(approvalcases.Registry))
	require.NoError(t, err)
	cfg := []byte("services:\n  logs:\n    url: " + col.URL + "\ndecision_logs:\n  service: logs\n  reporting:\n    trigger: manual\n")
	rs := start(t, withRegistry(reg), withOPAConfig(cfg, "test"), withEngine(engine.Modules(
		engine.Source{File: approvalcases.PolicyFile, Text: approvalcases.Policy})))
	applied, ignored := approvalcases.Cases()[0], approvalcases.Cases()[3]
	for _, tc := range []approvalcases.Case{applied, ignored} {
		status, out := rs.post(t, "/v1/decide", []byte(fmt.Sprintf(`{"history": %s, "approvals": %s}`, tc.History, tc.Approvals)))
		require.Equal(t, http.StatusOK, status, string(out))
	}
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(ctx))
	col.mu.Lock()
	events := col.events
	col.mu.Unlock()
	require.Len(t, events, 2)
	var got []map[string]any
	for _, e := range events {
		res := e["result"].(map[string]any)
		list := res["approvals"].([]any)
		require.Len(t, list, 1)
		got = append(got, list[0].(map[string]any))
	}
	if got[0]["applied"] == false {
		got[0], got[1] = got[1], got[0]
	}
	assert.Equal(t, true, got[0]["applied"])
	assert.Equal(t, []any{"ana"}, got[0]["approvers"])
	assert.Contains(t, got[0]["why"], "applied: approved by ana")
	assert.Equal(t, false, got[1]["applied"])
	assert.Equal(t, []any{"ana"}, got[1]["approvers"])
	assert.Contains(t, got[1]["why"], "not what the approver was shown")
}

// TestApprovalsBindWhenAResumeFallsBack: a history that extends a
// remembered prefix but cannot resume from it (here the request brings
// its own registry, so the prefix's facts do not apply) is decoded whole,
// and its approvals still bind: the fallback reads the same members as
// the first scan.
func TestApprovalsBindWhenAResumeFallsBack(t *testing.T) {
	regJSON := `{"capabilities": [{"id": "vault", "defer_loading": true}], "tools": [{"name": "transfer_funds"}, {"name": "pay_invoice"}, {"name": "secret_op", "capability": "vault"}]}`
	cases := 0
	for _, tc := range approvalcases.Cases() {
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, []byte(tc.History)))
		var msgs []json.RawMessage
		require.NoError(t, json.Unmarshal(compact.Bytes(), &msgs))
		if len(msgs) < 2 {
			continue
		}
		cases++
		t.Run(tc.Name, func(t *testing.T) {
			rs := approvalServer(t) // the cases' histories share prefixes
			prefix := "[" + string(bytes.Join(bytesOf(msgs[:len(msgs)-1]), []byte(","))) + "]"
			for range 2 { // the second sight is remembered
				status, out := rs.post(t, "/v1/decide", []byte(`{"history": `+prefix+`}`))
				require.Equal(t, http.StatusOK, status, "%s", out)
			}
			fallback := `policycheck_prefix_cache_lookups_total{result="fallback"}`
			before := metricValue(t, rs, fallback)
			status, out := rs.post(t, "/v1/decide", []byte(fmt.Sprintf(`{"registry": %s, "history": %s, "approvals": %s}`, regJSON, compact.Bytes(), tc.Approvals)))
			require.Equal(t, http.StatusOK, status, "%s", out)
			require.Equal(t, before+1, metricValue(t, rs, fallback), "the request fell back")
			var d engine.Decision
			require.NoError(t, json.Unmarshal(out, &d))
			require.NotEmpty(t, d.Calls)
			for _, c := range d.Calls {
				assert.Equal(t, tc.Verdict, c.Verdict, "%+v", c)
			}
			require.Len(t, d.Approvals, 1, "the decision records the approval")
			assert.Equal(t, tc.Applied, d.Approvals[0].Applied, d.Approvals[0].Why)
		})
	}
	require.Positive(t, cases, "some case has a history of two messages or more")
}

func bytesOf(raws []json.RawMessage) [][]byte {
	out := make([][]byte, len(raws))
	for i, r := range raws {
		out[i] = r
	}
	return out
}

// TestApprovalIsUsedOnceInARun: the approval that made call t2 execute at
// one step of a run authorises nothing at a later step, once the run's
// history holds t2's tool return and the model repeats the call (same id,
// tool and arguments): the call needs an approval again and the decision
// says the approval was already used.
func TestApprovalIsUsedOnceInARun(t *testing.T) {
	rs := approvalServer(t)
	pay := map[string]any{"from": "ops", "to": "savings", "amount": 5000}
	t2 := map[string]any{"part_kind": "tool-call", "tool_name": "transfer_funds", "tool_call_id": "t2", "args": pay}
	approvals := fmt.Sprintf(`{"t2": {"kind": "tool-approved", "digest": %q, "approvers": ["ana"]}}`,
		approvalcases.Digest("t2", "transfer_funds", pay))
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal(approvalcases.Later([]map[string]any{t2}, t2), &msgs))
	require.Len(t, msgs, 4, "prompt, response with t2, t2's return, response repeating t2")
	step := func(offset int, messages []json.RawMessage) engine.Decision {
		t.Helper()
		body := fmt.Sprintf(`{"offset": %d, "messages": [%s], "approvals": %s}`, offset, bytes.Join(bytesOf(messages), []byte(",")), approvals)
		status, out := rs.post(t, "/v1/runs/used-once/decide", []byte(body))
		require.Equal(t, http.StatusOK, status, "%s", out)
		var d engine.Decision
		require.NoError(t, json.Unmarshal(out, &d))
		require.Len(t, d.Calls, 1)
		require.Len(t, d.Approvals, 1)
		return d
	}
	first := step(0, msgs[:2])
	assert.Equal(t, engine.Execute, first.Calls[0].Verdict, "%+v", first.Calls[0])
	assert.True(t, first.Approvals[0].Applied, first.Approvals[0].Why)

	again := step(2, msgs[2:])
	assert.Equal(t, engine.ApprovalRequired, again.Calls[0].Verdict, "%+v", again.Calls[0])
	assert.False(t, again.Approvals[0].Applied)
	assert.Contains(t, again.Approvals[0].Why, `not applied: already used`)
	assert.Contains(t, strings.Join(again.Calls[0].Reasons, "\n"), `already used`)

	// The same over /v1/decide, the history resumed from a remembered
	// prefix (the one that holds t2's return).
	prefix := "[" + string(bytes.Join(bytesOf(msgs[:3]), []byte(","))) + "]"
	for range 2 { // the second sight is remembered
		status, out := rs.post(t, "/v1/decide", []byte(`{"history": `+prefix+`}`))
		require.Equal(t, http.StatusOK, status, "%s", out)
	}
	hit := `policycheck_prefix_cache_lookups_total{result="hit"}`
	before := metricValue(t, rs, hit)
	whole := "[" + string(bytes.Join(bytesOf(msgs), []byte(","))) + "]"
	status, out := rs.post(t, "/v1/decide", []byte(`{"history": `+whole+`, "approvals": `+approvals+`}`))
	require.Equal(t, http.StatusOK, status, "%s", out)
	require.Equal(t, before+1, metricValue(t, rs, hit), "the history resumed from the remembered prefix")
	var d engine.Decision
	require.NoError(t, json.Unmarshal(out, &d))
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.ApprovalRequired, d.Calls[0].Verdict, "%+v", d.Calls[0])
	require.Len(t, d.Approvals, 1)
	assert.Contains(t, d.Approvals[0].Why, `not applied: already used`)
}
