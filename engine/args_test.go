package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/trust"
)

// argsRegistry: delete_repo requires {"repo": string} and nothing else;
// get_time has no schema.
const argsRegistry = `{"tools": [
	{"name": "delete_repo", "max_retries": 1, "parameters_json_schema": {
		"type": "object",
		"properties": {"repo": {"type": "string"}, "force": {"type": "boolean"}},
		"required": ["repo"],
		"additionalProperties": false}},
	{"name": "get_time"}
]}`

// deleteRepoApproval is the rule of issue 31: its message reads
// input.call.args.repo, so without a schema it stops applying when the
// model sends {"name": ...}.
var deleteRepoApproval = engine.Source{File: "repos.rego", Text: `package policycheck.rules.repos

require_approval contains {"reason": "deleting a repository", "message": sprintf("Delete %s?", [input.call.args.repo])} if {
	input.call.tool == "delete_repo"
}

deny contains "get_time with args" if {
	input.call.tool == "get_time"
	input.call.args.deny == true
}
`}

func argsDecide(t *testing.T, reg *facts.Registry, tool, args string) engine.CallVerdict {
	t.Helper()
	e := mustEngine(t, reg, engine.Modules(deleteRepoApproval))
	h := mustHistory(t, wReq(wUser("go")), wResp("", wCall(tool, "c1", args)))
	d := mustDecide(t, e, h, nil)
	require.Len(t, d.Calls, 1)
	return d.Calls[0]
}

// TestInvalidArgs: a call whose arguments fail its tool's schema gets
// invalid_args with a retry message saying what is wrong, and no rule
// sees it; valid arguments reach the rules; a tool without a schema
// behaves as before.
func TestInvalidArgs(t *testing.T) {
	reg := mustRegistry(t, argsRegistry)
	for _, tc := range []struct {
		note, tool, args string
		verdict          string
		message          []string // substrings of the model-facing message
	}{
		{note: "missing required field (issue 31)", tool: "delete_repo", args: `{"name": "acme/site"}`,
			verdict: engine.InvalidArgs, message: []string{"2 validation errors", "(root): missing property 'repo'", "'name' not allowed"}},
		{note: "wrong type", tool: "delete_repo", args: `{"repo": 7}`,
			verdict: engine.InvalidArgs, message: []string{"1 validation error in the arguments: /repo: got number, want string", "Fix the errors and try again."}},
		{note: "extra field under additionalProperties false", tool: "delete_repo", args: `{"repo": "a", "branch": "b"}`,
			verdict: engine.InvalidArgs, message: []string{"'branch'"}},
		{note: "arguments as a JSON string are parsed first", tool: "delete_repo", args: `"{\"repo\": 7}"`,
			verdict: engine.InvalidArgs, message: []string{"/repo: got number, want string"}},
		{note: "valid arguments as a JSON string", tool: "delete_repo", args: `"{\"repo\": \"acme/site\"}"`,
			verdict: engine.ApprovalRequired},
		{note: "unparsable arguments", tool: "delete_repo", args: `"{\"repo\": "`,
			verdict: engine.InvalidArgs, message: []string{"(root): the arguments are not valid JSON"}},
		{note: "no arguments are {}", tool: "delete_repo", args: `null`,
			verdict: engine.InvalidArgs, message: []string{"missing property 'repo'"}},
		{note: "an empty string is {}", tool: "delete_repo", args: `""`,
			verdict: engine.InvalidArgs, message: []string{"missing property 'repo'"}},
		{note: "a JSON array is not an object", tool: "delete_repo", args: `"[1]"`,
			verdict: engine.InvalidArgs, message: []string{"want object"}},
		{note: "valid arguments reach the rules", tool: "delete_repo", args: `{"repo": "acme/site"}`,
			verdict: engine.ApprovalRequired},
		{note: "a tool without a schema behaves as today", tool: "get_time", args: `{"deny": true}`,
			verdict: engine.Denied},
		{note: "a tool without a schema takes any arguments", tool: "get_time", args: `"not json"`,
			verdict: engine.Execute},
	} {
		t.Run(tc.note, func(t *testing.T) {
			c := argsDecide(t, reg, tc.tool, tc.args)
			require.Equal(t, tc.verdict, c.Verdict, "%+v", c)
			for _, m := range tc.message {
				assert.Contains(t, c.Message, m)
			}
			if tc.verdict == engine.InvalidArgs {
				assert.NotEmpty(t, c.ArgsErrors)
				assert.NotContains(t, c.Message, "get_time", "the message names no other tool")
				assert.Less(t, len(c.Message), 1200)
				assert.Empty(t, c.Digest, "an invalid call is never handed to an approver")
			}
		})
	}
}

// TestInvalidArgsWithoutSchemaFailsOpen pins the failure: the same
// rule and call with no schema in the registry executes without approval.
// (With the schema, TestInvalidArgs shows invalid_args.)
func TestInvalidArgsWithoutSchemaFailsOpen(t *testing.T) {
	reg := mustRegistry(t, `{"tools": [{"name": "delete_repo"}, {"name": "get_time"}]}`)
	c := argsDecide(t, reg, "delete_repo", `{"name": "acme/site"}`)
	assert.Equal(t, engine.Execute, c.Verdict)
}

// TestInvalidArgsNoRuleSeesTheCall: no deny, require_approval or
// log-only rule is evaluated on a call whose arguments fail: a rule that
// would deny every call it sees leaves the verdict invalid_args, and the
// call's input carries no arguments.
func TestInvalidArgsNoRuleSeesTheCall(t *testing.T) {
	reg := mustRegistry(t, argsRegistry)
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "all.rego", Text: `package policycheck.rules.all

deny contains "seen" if input.call

require_approval contains {"reason": "seen", "message": "seen"} if input.call
`}))
	h := mustHistory(t, wReq(wUser("go")), wResp("", wCall("delete_repo", "c1", `{"name": "x"}`), wCall("delete_repo", "c2", `{"repo": "x"}`)))
	d := mustDecide(t, e, h, nil)
	require.Len(t, d.Calls, 2)
	assert.Equal(t, engine.InvalidArgs, d.Calls[0].Verdict)
	assert.Empty(t, d.Calls[0].WouldDeny)
	assert.Equal(t, engine.Denied, d.Calls[1].Verdict)

	in, err := e.Input(context.Background(), engine.Request{History: h})
	require.NoError(t, err)
	calls := in.(map[string]any)["dispatch"].(map[string]any)["calls"].([]any)
	first := calls[0].(map[string]any)
	assert.Nil(t, first["args"])
	assert.Equal(t, true, first["invalid_args"])
	_, marked := calls[1].(map[string]any)["invalid_args"]
	assert.False(t, marked)
}

// TestInvalidArgsAfterTheGate: the gate comes first (spec X2): a tool the
// model cannot call yet gets the gate's refusal, not a message about its
// arguments.
func TestInvalidArgsAfterTheGate(t *testing.T) {
	reg := mustRegistry(t, `{"capabilities": [{"id": "repos", "defer_loading": true}], "tools": [
	{"name": "delete_repo", "capability": "repos", "parameters_json_schema": {"type": "object", "required": ["repo"]}}]}`)
	e := mustEngine(t, reg)
	h := mustHistory(t, wReq(wUser("go")), wResp("", wCall("delete_repo", "c1", `{}`)))
	d := mustDecide(t, e, h, nil)
	assert.Equal(t, engine.NotAvailableYet, d.Calls[0].Verdict)
}

// TestInvalidArgsReplacementPolicy: an availability policy that does not
// know the verdict cannot execute a call whose arguments fail.
func TestInvalidArgsReplacementPolicy(t *testing.T) {
	reg := mustRegistry(t, argsRegistry)
	e := mustEngine(t, reg, engine.WithoutDefaults(), engine.Modules(engine.Source{File: "avail.rego", Text: `package policycheck.availability

decision := {
	"available": {"delete_repo", "get_time"},
	"advertised": {"delete_repo", "get_time"},
	"dispatch_available": {"delete_repo", "get_time"},
	"verdicts": [{"verdict": "execute", "rule": "gate"} | some _ in input.dispatch.calls],
}
`}))
	h := mustHistory(t, wReq(wUser("go")), wResp("", wCall("delete_repo", "c1", `{"repo": 1}`), wCall("get_time", "c2", `{}`)))
	d := mustDecide(t, e, h, nil)
	assert.Equal(t, engine.InvalidArgs, d.Calls[0].Verdict)
	assert.True(t, strings.HasPrefix(d.Calls[0].Message, "1 validation error"), d.Calls[0].Message)
	assert.Equal(t, engine.Execute, d.Calls[1].Verdict)
}

// TestRunInvalidArgsRetries: an invalid_args refusal is charged as
// pydantic-ai charges a validation retry (spec X8): against the tool's
// budget, from the first one, and the run exceeds it as it would.
func TestRunInvalidArgsRetries(t *testing.T) {
	reg := mustRegistry(t, argsRegistry)
	e := runEngine(t, reg)
	bad := func(id string) facts.Part {
		p := runCallPart("delete_repo", id)
		p.Args = []byte(`{"name": "acme/site"}`)
		return p
	}
	r := e.NewRun()
	sd, err := r.Step(context.Background(), []facts.Message{runPrompt(), runResponse(bad("c1"))}, nil)
	require.NoError(t, err)
	require.Equal(t, engine.InvalidArgs, sd.Calls[0].Verdict)
	assert.True(t, sd.Retries[0].Charged)
	assert.False(t, sd.Retries[0].Exceeded)
	assert.Equal(t, 1, sd.Retries[0].Budget)

	sd, err = r.Step(context.Background(), []facts.Message{runRequest(runRetryPart("delete_repo", "c1")), runResponse(bad("c2"))}, nil)
	require.NoError(t, err)
	require.Equal(t, engine.InvalidArgs, sd.Calls[0].Verdict)
	assert.True(t, sd.Retries[0].Exceeded)
	assert.Equal(t, 1, r.Retries()["delete_repo"])
	var ex *engine.ExceededError
	require.ErrorAs(t, sd.Err(), &ex)
	assert.Contains(t, ex.Error(), "Tool 'delete_repo' exceeded max retries count of 1")
}

// TestInvalidArgsValidatesTheArgumentsToExecute: an approver's
// override_args are what the call would execute with, so they are what
// is validated; the approval does not apply to a call whose arguments
// fail.
func TestInvalidArgsValidatesTheArgumentsToExecute(t *testing.T) {
	reg := mustRegistry(t, argsRegistry)
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "repos.rego", Text: `package policycheck.rules.repos

require_approval contains {"reason": "deleting a repository", "message": sprintf("Delete %s?", [input.call.args.repo])} if {
	input.call.tool == "delete_repo"
	not input.call.approval
}
`}))
	h := mustHistory(t, wReq(wUser("go")), wResp("", wCall("delete_repo", "c1", `{"repo": "acme/site"}`)))
	id := "c1"
	approve := func(override string) *engine.Decision {
		a := facts.Approval{Kind: facts.ToolApproved, Approvers: []string{"ana"},
			Digest: trust.CallDigest(&id, "delete_repo", []byte(`{"repo": "acme/site"}`))}
		if override != "" {
			a.OverrideArgs = []byte(override)
		}
		d, err := e.Decide(context.Background(), engine.Request{History: h, Approvals: facts.Approvals{"c1": a}})
		require.NoError(t, err)
		return d
	}
	assert.Equal(t, engine.Execute, approve("").Calls[0].Verdict)
	d := approve(`{"repo": 5}`)
	assert.Equal(t, engine.InvalidArgs, d.Calls[0].Verdict)
	assert.Contains(t, d.Calls[0].Message, "/repo: got number, want string")
	require.Len(t, d.Approvals, 1)
	assert.False(t, d.Approvals[0].Applied)
	assert.Equal(t, engine.Execute, approve(`{"repo": "acme/other"}`).Calls[0].Verdict)
}

// TestInvalidArgsFailClosedWins: a decision that fails closed (here a
// filter that errors) denies every call, an invalid one too, and reports
// no argument problems for it: the fault is the policy's.
func TestInvalidArgsFailClosedWins(t *testing.T) {
	reg := mustRegistry(t, `{"capabilities": [{"id": "ops"}], "tools": [
	{"name": "delete_repo", "capability": "ops", "parameters_json_schema": {"type": "object", "required": ["repo"]}}]}`)
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "ops.rego", Text: "package policycheck.capabilities.ops\n\nprepare_tools contains \"no_such_tool\"\n"}))
	d := mustDecide(t, e, mustHistory(t, wReq(wUser("go")), wResp("", wCall("delete_repo", "c1", `{}`))), nil)
	require.NotEmpty(t, d.Errors)
	assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
	assert.Empty(t, d.Calls[0].ArgsErrors)
}
