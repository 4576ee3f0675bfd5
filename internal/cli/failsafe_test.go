package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/ground/faults"
)

// sandboxRule denies delete_repo outside the sandbox; on a tool with no
// schema, "repo": 42 makes startswith raise a type error (issue 43,
// item 11).
const sandboxRule = `package policycheck.rules.repos

deny contains "only sandbox repositories may be deleted" if {
	input.call.tool == "delete_repo"
	not startswith(input.call.args.repo, "sandbox-")
}
`

// nineCalls is a response of nine calls, the sixth with "repo": 42.
func nineCalls() string {
	args := []string{`{"repo": "sandbox-1"}`, `{"repo": "prod-1"}`, `{}`, `{"repo": "sandbox-2"}`, `{"repo": "prod-2"}`,
		`{"repo": 42}`, `{"repo": "sandbox-3"}`, `{}`, `{"repo": "prod-3"}`}
	var parts []string
	for i, a := range args {
		tool := "delete_repo"
		if a == `{}` {
			tool = "get_time"
		}
		parts = append(parts, fmt.Sprintf(`{"part_kind": "tool-call", "tool_name": %q, "tool_call_id": "c%d", "args": %s}`, tool, i+1, a))
	}
	return `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "clean up"}]},
 {"kind": "response", "parts": [` + strings.Join(parts, ",\n  ") + `]}]`
}

type failsafeDecision struct {
	Available  []string
	Advertised []string
	Errors     []string
	Calls      []struct {
		Tool, Verdict, Message string
		Reasons                []string
	}
}

// TestEvalOneBadArgumentFailsOnlyItsCall: an error while evaluating the
// rules about one call denies that call, naming the rule and the error,
// and leaves availability, advertisement and the other eight calls as
// they are (issue 43, item 11); an error in a hide rule, which decides
// availability, still fails the whole decision closed.
func TestEvalOneBadArgumentFailsOnlyItsCall(t *testing.T) {
	dir := policyFiles(t, map[string]string{"pol/repos.rego": sandboxRule, "noschema.yaml": reposNoSchema, "h.json": nineCalls(),
		"hide/hide.rego": `package policycheck.rules.hide

hide contains "delete_repo" if upper(input.context.team) == "OPS"
`,
		"ctx.json": `{"team": 7}`})
	t.Chdir(dir)
	code, stdout, stderr := policyRun(t, "eval", "--registry", "noschema.yaml", "--history", "h.json", "--policy", "pol")
	require.Equal(t, cli.ExitOK, code, stderr)
	var d failsafeDecision
	require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
	assert.Empty(t, d.Errors, "one call's rule error is not the decision's")
	assert.Equal(t, []string{"delete_repo", "get_time"}, d.Available)
	assert.Equal(t, []string{"delete_repo", "get_time"}, d.Advertised)
	require.Len(t, d.Calls, 9)
	want := []string{"execute", "denied", "execute", "execute", "denied", "denied", "execute", "execute", "denied"}
	for i, c := range d.Calls {
		assert.Equal(t, want[i], c.Verdict, "call %d (%s)", i+1, c.Tool)
		if i != 5 && c.Verdict == "denied" {
			assert.Contains(t, strings.Join(c.Reasons, "\n"), "only sandbox repositories may be deleted")
		}
	}
	bad := d.Calls[5]
	assert.Equal(t, "Tool 'delete_repo' was not run: a policy rule about this call could not be evaluated with its arguments. "+
		"Check that each argument has the type the tool expects.", bad.Message)
	reasons := strings.Join(bad.Reasons, "\n")
	assert.Contains(t, reasons, "rule policycheck.rules.repos.deny (pol/repos.rego:3) raised an error for this call", "the reason names the rule")
	assert.Contains(t, reasons, "pol/repos.rego:5: eval_type_error: startswith: operand 1 must be string but got number", "and the error")

	code, stdout, stderr = policyRun(t, "eval", "--registry", "noschema.yaml", "--history", "h.json", "--policy", "pol",
		"--policy", "hide", "--context", "ctx.json")
	require.Equal(t, cli.ExitOK, code, stderr)
	d = failsafeDecision{}
	require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
	require.Len(t, d.Errors, 1, stdout)
	assert.Contains(t, d.Errors[0], "hide/hide.rego:3: eval_type_error: upper: operand 1 must be string but got number")
	assert.Empty(t, d.Available)
	assert.Empty(t, d.Advertised)
	for _, c := range d.Calls {
		assert.Equal(t, "denied", c.Verdict)
		assert.Contains(t, c.Message, "the tool policy could not be evaluated")
	}
}

// TestEvalPanicFailsClosed: a panic on the decision's path (issue 43,
// item 2) does not crash eval: it prints the decision failed closed,
// with the panic in errors, and exits as any fail-closed decision does
// (0, or 3 with --fail-on-refusal). On main the trigger (an
// amount of 1e10000000 against a minimum) crashed eval with a nil
// dereference in the schema validator.
func TestEvalPanicFailsClosed(t *testing.T) {
	dir := policyFiles(t, map[string]string{"noschema.yaml": reposNoSchema, "h.json": nineCalls()})
	t.Chdir(dir)
	ctx := faults.With(context.Background(), func(point string) {
		if point == faults.EngineDecide {
			panic("injected")
		}
	})
	eval := func(extra ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.RunContext(ctx, append([]string{"eval", "--registry", "noschema.yaml", "--history", "h.json"}, extra...),
			strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, stdout, stderr := eval()
	require.Equal(t, cli.ExitOK, code, stderr)
	var d failsafeDecision
	require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
	require.Len(t, d.Errors, 1)
	assert.Contains(t, d.Errors[0], "internal error: the engine panicked while deciding, so the decision fails closed (a bug: please report it): injected")
	assert.Empty(t, d.Available)
	require.Len(t, d.Calls, 9)
	for _, c := range d.Calls {
		assert.Equal(t, "denied", c.Verdict)
	}
	code, _, stderr = eval("--fail-on-refusal")
	assert.Equal(t, cli.ExitRefused, code)
	assert.Contains(t, stderr, "the decision failed closed: internal error: the engine panicked")
}

// TestEvalIndexedBuiltinWithAWrongTypeFailsTheCall: a deny rule whose
// body is startswith, endswith, strings.any_prefix_match,
// strings.any_suffix_match or glob.match over a call's argument is
// answered by OPA's rule index, not evaluated, and the index leaves the
// rule out for a value that is not a string, with no type error: on main
// each call with "repo": 42 executed. The engine evaluates a policy set
// that calls one of them with the index off, so the error is raised and
// fails that call closed (item 11), and a string argument is decided as
// before.
func TestEvalIndexedBuiltinWithAWrongTypeFailsTheCall(t *testing.T) {
	for _, body := range []string{
		`startswith(input.call.args.repo, "prod-")`,
		`endswith(input.call.args.repo, "-prod")`,
		`strings.any_prefix_match(input.call.args.repo, ["prod-", "live-"])`,
		`strings.any_suffix_match(input.call.args.repo, ["-prod", "-live"])`,
		`glob.match("prod-*", [], input.call.args.repo)`,
	} {
		t.Run(strings.SplitN(body, "(", 2)[0], func(t *testing.T) {
			dir := policyFiles(t, map[string]string{
				"pol/repos.rego": "package policycheck.rules.repos\n\ndeny contains \"production repositories are off limits\" if {\n\tinput.call.tool == \"delete_repo\"\n\t" + body + "\n}\n",
				"noschema.yaml":  reposNoSchema,
				"h.json": `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "clean up"}]},
 {"kind": "response", "parts": [
  {"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": "c1", "args": {"repo": 42}},
  {"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": "c2", "args": {"repo": "prod-x-prod"}},
  {"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": "c3", "args": {"repo": "sandbox"}}]}]`})
			t.Chdir(dir)
			code, stdout, stderr := policyRun(t, "eval", "--registry", "noschema.yaml", "--history", "h.json", "--policy", "pol")
			require.Equal(t, cli.ExitOK, code, stderr)
			var d failsafeDecision
			require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
			assert.Empty(t, d.Errors)
			require.Len(t, d.Calls, 3)
			assert.Equal(t, "denied", d.Calls[0].Verdict, "a number where the rule reads a string is never let through")
			assert.Contains(t, strings.Join(d.Calls[0].Reasons, "\n"), "eval_type_error")
			assert.Equal(t, "denied", d.Calls[1].Verdict)
			assert.Contains(t, strings.Join(d.Calls[1].Reasons, "\n"), "production repositories are off limits")
			assert.Equal(t, "execute", d.Calls[2].Verdict)
		})
	}
}
