package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// TestRegistryRequiresApprovalOverHTTP: requires_approval on a tool or a
// capability gives approval_required on /v1/decide without any Rego; a
// deny rule still wins; an approval bound to the call lets it execute.
func TestRegistryRequiresApprovalOverHTTP(t *testing.T) {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(`capabilities:
  - id: ops
    requires_approval: true
tools:
  - name: get_time
  - name: deploy
    requires_approval: true
  - name: restart
    capability: ops
`))
	require.NoError(t, err)
	rs := start(t, withRegistry(reg), withEngine(engine.Modules(engine.Source{File: "guard.rego",
		Text: "package policycheck.rules.guard\n\ndeny contains \"no prod\" if input.call.args.env == \"prod\"\n"})))
	history := func(env string) string {
		return fmt.Sprintf(`[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]},
 {"kind": "response", "parts": [
  {"part_kind": "tool-call", "tool_name": "deploy", "args": {"env": %[1]q}, "tool_call_id": "c0"},
  {"part_kind": "tool-call", "tool_name": "restart", "args": {"env": %[1]q}, "tool_call_id": "c1"},
  {"part_kind": "tool-call", "tool_name": "get_time", "args": {"env": %[1]q}, "tool_call_id": "c2"}]}]`, env)
	}
	decide := func(body string) engine.Decision {
		status, out := rs.post(t, "/v1/decide", []byte(body))
		require.Equal(t, http.StatusOK, status, string(out))
		return decisionOf(t, "/v1/decide", out)
	}
	d := decide(`{"history": ` + history("dev") + `}`)
	require.Len(t, d.Calls, 3)
	assert.Equal(t, engine.ApprovalRequired, d.Calls[0].Verdict, "the tool's requires_approval")
	assert.Equal(t, engine.ApprovalRequired, d.Calls[1].Verdict, "its capability's requires_approval")
	assert.Equal(t, engine.Execute, d.Calls[2].Verdict)

	for _, c := range decide(`{"history": ` + history("prod") + `}`).Calls {
		assert.Equal(t, engine.Denied, c.Verdict, "a deny wins: %+v", c)
	}

	approved := decide(fmt.Sprintf(`{"history": %s, "approvals": {"c0": {"kind": "tool-approved", "digest": %q, "approvers": ["ana"]}}}`,
		history("dev"), d.Calls[0].Digest))
	assert.Equal(t, engine.Execute, approved.Calls[0].Verdict, "a bound approval executes: %+v", approved.Calls[0])
	assert.Equal(t, engine.ApprovalRequired, approved.Calls[1].Verdict, "it approves its call only")
}

// TestContextSchemaOverHTTP: a request whose context fails the registry's
// context_schema is refused with 400 and the JSON pointer into the body,
// on /v1/decide, /v1/explain and a run's decide; a valid one decides.
func TestContextSchemaOverHTTP(t *testing.T) {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(`context_schema:
  type: object
  properties:
    group: {enum: [admin, staff]}
tools:
  - name: get_time
`))
	require.NoError(t, err)
	rs := start(t, withRegistry(reg))
	hist := `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "get_time", "args": {}, "tool_call_id": "c0"}]}]`
	for i, ep := range []struct{ path, body string }{
		{"/v1/decide", `{"history": ` + hist + `, "context": %s}`},
		{"/v1/explain", `{"history": ` + hist + `, "context": %s}`},
		{"/v1/runs/ctx-%d/decide", `{"offset": 0, "messages": ` + hist + `, "context": %s}`},
	} {
		path := ep.path
		if strings.Contains(path, "%d") {
			path = fmt.Sprintf(path, i)
		}
		status, out := rs.post(t, path, []byte(fmt.Sprintf(ep.body, `{"group": "root"}`)))
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", path, out)
		var e struct{ Error server.Error }
		require.NoError(t, json.Unmarshal(out, &e), string(out))
		assert.Equal(t, "/context/group", e.Error.Pointer, "%s: %s", path, e.Error.Message)
		assert.Contains(t, e.Error.Message, "context_schema", path)

		status, out = rs.post(t, path+"", []byte(fmt.Sprintf(ep.body, `{"group": "admin"}`)))
		require.Equal(t, http.StatusOK, status, "%s: %s", path, out)
		assert.Equal(t, engine.Execute, decisionOf(t, path, out).Calls[0].Verdict, path)
	}
}
