package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

// argsRegistry gives delete_repo a schema requiring repo.
const argsRegistry = `tools:
  - name: delete_repo
    max_retries: 1
    parameters_json_schema:
      type: object
      properties: {repo: {type: string}}
      required: [repo]
`

// argsPolicy is the rule of issue 31: its message reads args.repo.
const argsPolicy = `package policycheck.rules.repos

require_approval contains {"reason": "deleting a repository", "message": sprintf("Delete %s?", [input.call.args.repo])} if {
	input.call.tool == "delete_repo"
}
`

func argsHistory(id, args string) string {
	return fmt.Sprintf(`[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "delete it"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": %q, "args": %s}]}]`, id, args)
}

// TestInvalidArgsOverHTTP: through the sidecar, a call whose arguments
// lack the field the approval rule reads gets invalid_args (never
// execute), with the retry message and the problems; valid arguments
// still need approval; on a run, the refusals are charged as validation
// retries until the tool's budget is exceeded.
func TestInvalidArgsOverHTTP(t *testing.T) {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(argsRegistry))
	require.NoError(t, err)
	rs := start(t, withRegistry(reg), withEngine(engine.Modules(engine.Source{File: "repos.rego", Text: argsPolicy})))

	decide := func(args string) engine.CallVerdict {
		status, out := rs.post(t, "/v1/decide", []byte(`{"history": `+argsHistory("c1", args)+`}`))
		require.Equal(t, http.StatusOK, status, string(out))
		var d engine.Decision
		require.NoError(t, json.Unmarshal(out, &d))
		require.Len(t, d.Calls, 1)
		return d.Calls[0]
	}
	c := decide(`{"name": "acme/site"}`)
	assert.Equal(t, engine.InvalidArgs, c.Verdict)
	assert.Contains(t, c.Message, "(root): missing property 'repo'")
	assert.Contains(t, c.Message, "Fix the errors and try again.")
	require.NotEmpty(t, c.ArgsErrors)
	assert.Equal(t, "", c.ArgsErrors[0].Pointer)
	assert.Equal(t, engine.InvalidArgs, decide(`"{\"repo\": 5}"`).Verdict)
	assert.Equal(t, engine.ApprovalRequired, decide(`{"repo": "acme/site"}`).Verdict)

	// A run: the first invalid_args is charged (count 0 of budget 1), the
	// second exceeds the budget, as pydantic-ai counts validation retries.
	type runDecision struct {
		engine.Decision
		Retries []engine.Retry `json:"retries"`
	}
	step := func(offset int, msgs string) runDecision {
		status, out := rs.post(t, "/v1/runs/args-run/decide", []byte(fmt.Sprintf(`{"offset": %d, "messages": %s}`, offset, msgs)))
		require.Equal(t, http.StatusOK, status, string(out))
		var d runDecision
		require.NoError(t, json.Unmarshal(out, &d))
		require.Len(t, d.Calls, 1)
		require.Len(t, d.Retries, 1)
		return d
	}
	first := step(0, argsHistory("c1", `{"name": "acme/site"}`))
	assert.Equal(t, engine.InvalidArgs, first.Calls[0].Verdict)
	assert.Equal(t, engine.Retry{Count: 0, Budget: 1, Charged: true}, first.Retries[0])
	second := step(2, `[{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "fix", "tool_name": "delete_repo", "tool_call_id": "c1"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": "c2", "args": {"name": "x"}}]}]`)
	assert.Equal(t, engine.InvalidArgs, second.Calls[0].Verdict)
	assert.True(t, second.Retries[0].Exceeded, "%+v", second.Retries[0])
	assert.Equal(t, 1, second.Retries[0].Count)
}

// TestHugeNumberArgsOverHTTP (issue 43, items 1 and 2): with the shipped
// registry, issue_refund's exclusiveMinimum made the schema validator
// dereference nil on an amount of 1e10000000, and the sidecar closed the
// connection with no answer; with examples/policies/transfers, an amount
// of 1e50000 reached the rules as null args and the transfer executed.
// Both are invalid_args, answered, on /v1/decide and on a run.
func TestHugeNumberArgsOverHTTP(t *testing.T) {
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	rs := start(t, withRegistry(reg), withEngine(engine.PolicyPaths("../examples/policies/transfers")))
	refund, err := os.ReadFile("../examples/histories/refund.json")
	require.NoError(t, err)
	transfer, err := os.ReadFile("../examples/histories/transfer.json")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, history, call, pointer string
	}{
		{"refund amount past the validator", strings.Replace(string(refund), `"amount": 42.5`, `"amount": 1e10000000`, 1), "c2", "/amount"},
		{"transfer amount past OPA", strings.Replace(string(transfer), `"amount": 250`, `"amount": 1e50000`, 1), "t1", "/amount"},
		{"transfer padding past OPA", strings.Replace(string(transfer), `"amount": 250`, `"amount": 999999, "note": 1e50000`, 1), "t1", "/note"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(out []byte) {
				var d engine.Decision
				require.NoError(t, json.Unmarshal(out, &d))
				for _, c := range d.Calls {
					if c.ToolCallID != nil && *c.ToolCallID == tc.call {
						assert.Equal(t, engine.InvalidArgs, c.Verdict, "%+v", c)
						require.Len(t, c.ArgsErrors, 1)
						assert.Equal(t, tc.pointer, c.ArgsErrors[0].Pointer)
						assert.Contains(t, c.ArgsErrors[0].Reason, "out of range")
						return
					}
				}
				t.Fatalf("no call %s in %s", tc.call, out)
			}
			status, out := rs.post(t, "/v1/decide", []byte(`{"history": `+tc.history+`}`))
			require.Equal(t, http.StatusOK, status, string(out))
			check(out)
			run := "huge-" + strings.ReplaceAll(tc.name, " ", "-")
			status, out = rs.post(t, "/v1/runs/"+run+"/decide", []byte(`{"offset": 0, "messages": `+tc.history+`}`))
			require.Equal(t, http.StatusOK, status, string(out))
			check(out)
		})
	}
}
