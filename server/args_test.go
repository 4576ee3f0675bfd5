package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
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
