package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// deleteRepoHistory calls delete_repo with {"name": ...} where the rule
// reads args.repo (issue 31).
const deleteRepoHistory = `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "delete it"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": "c1", "args": {"name": "acme/site"}}]}]`

// TestEvalInvalidArgs: the call executes without approval when
// the registry has no schema, and is invalid_args (never execute) when it
// has one; --fail-on-refusal counts it as a refusal, --format pretty tells
// what the model is told; a schema that does not compile is refused at
// load with its pointer.
func TestEvalInvalidArgs(t *testing.T) {
	dir := policyFiles(t, map[string]string{"pol/repos.rego": `package policycheck.rules.repos

require_approval contains {"reason": "deleting a repository", "message": sprintf("Delete %s?", [input.call.args.repo])} if {
	input.call.tool == "delete_repo"
}
`,
		"noschema.yaml": reposNoSchema, "schema.yaml": reposSchema, "h.json": deleteRepoHistory,
		"bad.yaml": "tools:\n  - name: delete_repo\n    parameters_json_schema: {type: object, properties: {repo: {type: 5}}}\n"})
	t.Chdir(dir)
	verdict := func(registry string) (string, string) {
		code, stdout, stderr := policyRun(t, "eval", "--registry", registry, "--history", "h.json", "--policy", "pol")
		require.Equal(t, cli.ExitOK, code, stderr)
		var d struct {
			Calls []struct{ Verdict, Message string }
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &d))
		require.Len(t, d.Calls, 1)
		return d.Calls[0].Verdict, d.Calls[0].Message
	}
	v, _ := verdict("noschema.yaml")
	assert.Equal(t, "execute", v, "without a schema the rule silently does not apply (the issue)")
	v, msg := verdict("schema.yaml")
	assert.Equal(t, "invalid_args", v)
	assert.Equal(t, "1 validation error in the arguments: (root): missing properties 'repo', 'force'\n\nFix the errors and try again.", msg)

	code, _, stderr := policyRun(t, "eval", "--registry", "schema.yaml", "--history", "h.json", "--policy", "pol", "--fail-on-refusal")
	assert.Equal(t, cli.ExitRefused, code)
	assert.Contains(t, stderr, "first delete_repo (invalid_args)")

	code, stdout, _ := policyRun(t, "eval", "--registry", "schema.yaml", "--history", "h.json", "--policy", "pol", "--format", "pretty")
	assert.Equal(t, cli.ExitOK, code)
	assert.Contains(t, stdout, "c1 delete_repo -> invalid_args\n      model is told: 1 validation error in the arguments: (root): missing properties 'repo', 'force'")

	code, _, stderr = policyRun(t, "eval", "--registry", "bad.yaml", "--history", "h.json")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stderr, "bad.yaml: /tools/0/parameters_json_schema/properties/repo/type: ")
}

// TestEvalHugeNumberArgs (issue 43, items 1 and 2): eval on the shipped
// registry and examples. An issue_refund amount of 1e10000000 crashed
// eval (the schema validator dereferenced nil on exclusiveMinimum); a
// transfer_funds amount of 1e50000, or a padding note of 1e50000 next to
// an amount the transfers policy denies, reached the rules as null args
// and executed. Each is invalid_args, naming the pointer.
func TestEvalHugeNumberArgs(t *testing.T) {
	dir := t.TempDir()
	refund, err := os.ReadFile("../../examples/histories/refund.json")
	require.NoError(t, err)
	transfer, err := os.ReadFile("../../examples/histories/transfer.json")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, history, call, pointer string
	}{
		{"refund amount past the validator", strings.Replace(string(refund), `"amount": 42.5`, `"amount": 1e10000000`, 1), "c2", "/amount"},
		{"transfer amount past OPA", strings.Replace(string(transfer), `"amount": 250`, `"amount": 1e50000`, 1), "t1", "/amount"},
		{"transfer padding past OPA", strings.Replace(string(transfer), `"amount": 250`, `"amount": 999999, "note": 1e50000`, 1), "t1", "/note"},
		{"a key twice", strings.Replace(string(transfer), `"amount": 250`, `"amount": 1000000000, "amount": 250`, 1), "t1", "/amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := writeFile(t, dir, "h.json", tc.history)
			res := run(t, "", "eval", "--registry", "../../examples/registry.yaml", "--history", h, "--policy", "../../examples/policies/transfers")
			require.Equal(t, cli.ExitOK, res.code, res.stderr)
			var d struct {
				Calls []struct {
					ToolCallID string `json:"tool_call_id"`
					Verdict    string
					ArgsErrors []struct{ Pointer, Reason string } `json:"args_errors"`
				}
			}
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &d))
			for _, c := range d.Calls {
				if c.ToolCallID == tc.call {
					assert.Equal(t, "invalid_args", c.Verdict)
					require.Len(t, c.ArgsErrors, 1)
					assert.Equal(t, tc.pointer, c.ArgsErrors[0].Pointer)
					return
				}
			}
			t.Fatalf("no call %s: %s", tc.call, res.stdout)
		})
	}
}

// TestRegistrySchemaExpansionRefused (issue 43, item 3): a registry whose
// schema expands past loader.MaxArgsSchemaExpansion subschemas (anyOf over
// $refs, 2^22: a 2 KB request took 13.6 s and 3.9 GB to validate) is
// refused at load, by eval and by serve before it listens: exit 2, the
// file and the pointer of the subschema.
func TestRegistrySchemaExpansionRefused(t *testing.T) {
	var defs strings.Builder
	for i := range 22 {
		fmt.Fprintf(&defs, `"a%d": {"anyOf": [{"$ref": "#/$defs/a%d"}, {"$ref": "#/$defs/a%d"}]}, `, i, i+1, i+1)
	}
	reg := writeFile(t, t.TempDir(), "exp.json", `{"tools": [{"name": "refund", "parameters_json_schema": {"type": "object",
		"properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": {`+defs.String()+`"a22": {"type": "string"}}}}]}`)
	h := writeFile(t, t.TempDir(), "h.json", `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "refund", "tool_call_id": "c1", "args": {"x": 5}}]}]`)
	for _, args := range [][]string{
		{"eval", "--registry", reg, "--history", h},
		{"serve", "--registry", reg, "--addr", "256.0.0.1:1"}, // an address it cannot listen on: never serves, whatever happens
	} {
		res := run(t, "", args...)
		assert.Equal(t, cli.ExitBadUsage, res.code, "%s: %s", args[0], res.stderr)
		assert.Contains(t, res.stderr, reg+": /tools/0/parameters_json_schema/$defs/a", args[0])
		assert.Contains(t, res.stderr, "expands to more than 10000 subschemas", args[0])
	}
}
