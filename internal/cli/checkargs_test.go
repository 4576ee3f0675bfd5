package cli_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// reposPolicy is the rule of issue 31 (a require_approval whose message
// reads input.call.args.repo), a guarded read, a deny read for every tool
// and a deliberate read marked so.
const reposPolicy = `package policycheck.rules.repos

require_approval contains {"reason": "deleting a repository", "message": sprintf("Delete %s?", [input.call.args.repo])} if {
	input.call.tool == "delete_repo"
}

deny contains "no repo" if {
	input.call.tool in {"delete_repo", "get_time"}
	object.get(input.call.args, "repo", "") == ""
}

deny contains "forced" if {
	input.call.args.force == true
}

deny contains "dry" if {
	input.call.tool == "delete_repo"
	# policycheck:ignore args
	input.call.args.dry_run == true
}

# policycheck:ignore args
# METADATA
# title: ignored
# description: every read of this rule is deliberate.
deny contains "mode" if {
	input.call.args.mode == "x"
}
`

const reposNoSchema = `tools:
  - name: delete_repo
  - name: get_time
`

const reposSchema = `tools:
  - name: delete_repo
    parameters_json_schema:
      type: object
      properties: {repo: {type: string}, force: {type: boolean}}
      required: [repo, force]
  - name: get_time
    parameters_json_schema: {type: object, required: [force], additionalProperties: false, properties: {force: {type: boolean}}}
`

// TestCheckFindsArgsNoSchemaRequires: with --registry, check reports a
// deny or require_approval rule reading input.call.args.<field> (in its
// message too) for tools whose schema does not require the field, names
// the fix, and stays quiet on a guarded read, a read the schemas
// guarantee, and a read marked deliberate.
func TestCheckFindsArgsNoSchemaRequires(t *testing.T) {
	dir := policyFiles(t, map[string]string{"pol/repos.rego": reposPolicy,
		"noschema.yaml": reposNoSchema, "schema.yaml": reposSchema})
	t.Chdir(dir)

	code, stdout, _ := policyRun(t, "check", "pol", "--registry", "noschema.yaml", "--format", "json")
	assert.Equal(t, cli.ExitBadUsage, code, stdout)
	out := decodeCheckReport(t, stdout)
	assert.Equal(t, []string{"args_not_required pol/repos.rego:3", "args_not_required pol/repos.rego:13"}, places(out.Findings), stdout)
	first := out.Findings[0].Message
	for _, want := range []string{
		"policycheck.rules.repos.require_approval reads input.call.args.repo: this rule does not apply when the model omits repo",
		`"delete_repo" in registry noschema.yaml has no parameters_json_schema`,
		`Require "repo" in the tool's parameters_json_schema`,
		`object.get(input.call.args, "repo", <a default that denies>)`,
		"# policycheck:ignore args",
	} {
		assert.Contains(t, first, want)
	}
	assert.NotContains(t, first, "get_time", "the rule compares input.call.tool with delete_repo only")
	assert.Contains(t, out.Findings[1].Message, "every registry tool")
	assert.Contains(t, out.Findings[1].Message, `"delete_repo", "get_time" in registry noschema.yaml have no parameters_json_schema`)

	// The pretty form gives file:row:col.
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "noschema.yaml")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.True(t, strings.HasPrefix(stdout, "pol/repos.rego:3:97: args_not_required: "), stdout)

	// Schemas that require repo and force: nothing to report.
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "schema.yaml", "--format", "json")
	assert.Equal(t, cli.ExitOK, code, stdout)
	assert.Empty(t, decodeCheckReport(t, stdout).Findings)

	// A schema that does not require the field is named as such.
	require.NoError(t, os.WriteFile("partial.yaml", []byte(strings.Replace(reposSchema, "required: [repo, force]", "required: [force]", 1)), 0o644))
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "partial.yaml", "--format", "json")
	assert.Equal(t, cli.ExitBadUsage, code, stdout)
	out = decodeCheckReport(t, stdout)
	require.Len(t, out.Findings, 1, stdout)
	assert.Contains(t, out.Findings[0].Message, `the parameters_json_schema of "delete_repo" in registry partial.yaml does not require "repo"`)

	// Without --registry the check is skipped, and the output says so.
	code, stdout, _ = policyRun(t, "check", "pol", "--format", "json")
	assert.Equal(t, cli.ExitOK, code, stdout)
	var rep struct{ Skipped []string }
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	require.Len(t, rep.Skipped, 1)
	assert.Contains(t, rep.Skipped[0], "rules reading call arguments no tool schema requires")
}
