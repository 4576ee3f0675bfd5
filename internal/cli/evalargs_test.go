package cli_test

import (
	"encoding/json"
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
