package cli_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
)

// approvalRegistry marks deploy requires_approval, and the ops
// capability, whose tools are restart and rollback; get_time is unmarked.
const approvalRegistry = `capabilities:
  - id: ops
    requires_approval: true
tools:
  - name: get_time
  - name: deploy
    requires_approval: true
  - name: restart
    capability: ops
  - name: rollback
    capability: ops
`

// approvalHistory is a history whose last response calls each tool named,
// with tool_call_id "c<i>" and the arguments {"env": env}.
func approvalHistory(env string, tools ...string) string {
	parts := []map[string]any{}
	for i, tool := range tools {
		parts = append(parts, map[string]any{"part_kind": "tool-call", "tool_name": tool,
			"args": map[string]any{"env": env}, "tool_call_id": "c" + string(rune('0'+i))})
	}
	h := []map[string]any{
		{"kind": "request", "parts": []map[string]any{{"part_kind": "user-prompt", "content": "go"}}},
		{"kind": "response", "parts": parts},
	}
	b, _ := json.Marshal(h)
	return string(b)
}

const prodDeny = "package policycheck.rules.guard\n\n" +
	"deny contains {\"reason\": \"no prod\", \"message\": \"not in prod\"} if input.call.args.env == \"prod\"\n"

func evalDecision(t *testing.T, args ...string) engine.Decision {
	t.Helper()
	res := run(t, "", append([]string{"eval"}, args...)...)
	require.Equal(t, 0, res.code, res.stderr)
	var d engine.Decision
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &d), res.stdout)
	return d
}

// TestRegistryRequiresApprovalThroughEval: requires_approval on a tool
// or a capability gives approval_required without any Rego; a deny rule
// still wins; an approval bound to the call lets it execute.
func TestRegistryRequiresApprovalThroughEval(t *testing.T) {
	dir := t.TempDir()
	reg := writeFile(t, dir, "registry.yaml", approvalRegistry)
	pol := writeFile(t, dir, "guard.rego", prodDeny)

	hist := writeFile(t, dir, "h.json", approvalHistory("dev", "deploy", "restart", "rollback", "get_time"))
	d := evalDecision(t, "--registry", reg, "--history", hist, "--policy", pol)
	require.Len(t, d.Calls, 4)
	for _, c := range d.Calls[:3] {
		assert.Equal(t, engine.ApprovalRequired, c.Verdict, "%+v", c)
		assert.NotEmpty(t, c.Digest)
	}
	assert.Equal(t, engine.Execute, d.Calls[3].Verdict, "an unmarked tool executes")
	assert.Contains(t, d.Calls[0].Reasons, `approval required by the registry: tool "deploy" is marked requires_approval`)
	assert.Contains(t, d.Calls[1].Reasons,
		`approval required by the registry: tool "restart" belongs to capability "ops", which is marked requires_approval`)

	res := run(t, "", "explain", "--registry", reg, "--history", hist, "--policy", pol)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "decided by the registry's requires_approval")
	res = run(t, "", "explain", "--registry", reg, "--history", hist, "--policy", pol, "--format", "json")
	require.Equal(t, 0, res.code, res.stderr)
	var x struct {
		Calls []engine.CallExplained `json:"calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &x), res.stdout)
	require.NotEmpty(t, x.Calls)
	require.NotNil(t, x.Calls[0].DecidedBy)
	assert.Equal(t, "policycheck.lib.gate", x.Calls[0].DecidedBy.Package)
	assert.Equal(t, "registry_approvals", x.Calls[0].DecidedBy.Rule, "explain names the registry's rule")
	assert.Equal(t, []engine.Decider{{Kind: "registry", Name: "requires_approval in the registry"}}, x.Calls[0].Deciders,
		"the operator's part is the registry's requires_approval, not a rules package")

	t.Run("a deny still wins", func(t *testing.T) {
		prod := writeFile(t, t.TempDir(), "h.json", approvalHistory("prod", "deploy", "restart"))
		d := evalDecision(t, "--registry", reg, "--history", prod, "--policy", pol)
		for _, c := range d.Calls {
			assert.Equal(t, engine.Denied, c.Verdict, "%+v", c)
		}
	})

	t.Run("a bound approval executes", func(t *testing.T) {
		one := writeFile(t, t.TempDir(), "h.json", approvalHistory("dev", "deploy"))
		d := evalDecision(t, "--registry", reg, "--history", one, "--policy", pol)
		require.Equal(t, engine.ApprovalRequired, d.Calls[0].Verdict)
		appr := writeFile(t, t.TempDir(), "a.json", `{"approvals": {"c0": {"kind": "tool-approved", "digest": "`+
			d.Calls[0].Digest+`", "approvers": ["ana"]}}}`)
		d = evalDecision(t, "--registry", reg, "--history", one, "--policy", pol, "--approvals", appr)
		assert.Equal(t, engine.Execute, d.Calls[0].Verdict, "%+v", d.Calls[0])
		require.Len(t, d.Approvals, 1)
		assert.True(t, d.Approvals[0].Applied, d.Approvals[0].Why)
	})
}

// contextRegistry has a context_schema: group is one of two names, and
// nothing else may be sent.
const contextRegistry = `context_schema:
  type: object
  properties:
    group: {enum: [admin, staff]}
  additionalProperties: false
tools:
  - name: get_time
`

// TestContextSchemaThroughCLI: a --context that fails the registry's
// context_schema is bad input (exit 2, naming the context and the JSON
// pointer), on eval, explain and replay; a valid one decides as before.
func TestContextSchemaThroughCLI(t *testing.T) {
	dir := t.TempDir()
	reg := writeFile(t, dir, "registry.yaml", contextRegistry)
	hist := writeFile(t, dir, "h.json", approvalHistory("dev", "get_time"))
	file := writeFile(t, dir, "ctx.json", `{"group": "root"}`)
	for _, tc := range []struct{ note, ctx, want string }{
		{"inline, a value the schema refuses", `{"group": "root"}`, "--context: /group: "},
		{"a field the schema forbids", `{"gruop": "admin"}`, "--context: (root): the context fails the registry's context_schema: additional properties 'gruop'"},
		{"a file", file, file + ": /group: "},
	} {
		t.Run(tc.note, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"eval", "--registry", reg, "--history", hist},
				{"explain", "--registry", reg, "--history", hist},
				{"replay", "--registry", reg, "--candidate-registry", reg, hist},
			} {
				res := run(t, "", append(cmd, "--context", tc.ctx)...)
				assert.Equal(t, 2, res.code, "%s: %s %s", cmd[0], res.stdout, res.stderr)
				assert.Empty(t, res.stdout, "nothing decided")
				assert.Contains(t, res.stderr, tc.want, cmd[0])
				assert.Contains(t, res.stderr, "context_schema", cmd[0])
			}
		})
	}
	d := evalDecision(t, "--registry", reg, "--history", hist, "--context", `{"group": "admin"}`)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict)
}

// TestCheckFindsContextReadsTheSchemaLacks: with a registry whose
// context_schema lists group, check reports a rule reading
// input.context.gruop (context_not_in_schema), in a deny rule and in a
// capability filter, and stays quiet on input.context.group and on a read marked
// deliberate.
func TestCheckFindsContextReadsTheSchemaLacks(t *testing.T) {
	dir := policyFiles(t, map[string]string{
		"pol/guard.rego": "package policycheck.rules.guard\n\n" +
			"deny contains \"not staff\" if input.context.gruop != \"staff\"\n\n" +
			"deny contains \"admin\" if input.context.group == \"admin\"\n\n" +
			"deny contains \"tenant\" if {\n\t# policycheck:ignore context\n\tinput.context.tenant == \"x\"\n}\n",
		"pol/ops.rego": "package policycheck.capabilities.ops\n\n" +
			"prepare_tools := {t.name | some t in input.tools} if input.context.gruop == \"admin\"\n",
		"registry.yaml": contextRegistry + "capabilities:\n  - id: ops\n",
	})
	t.Chdir(dir)
	code, stdout, _ := policyRun(t, "check", "pol", "--registry", "registry.yaml", "--format", "json")
	assert.Equal(t, cli.ExitBadUsage, code, stdout)
	out := decodeCheckReport(t, stdout)
	assert.Equal(t, []string{"context_not_in_schema pol/guard.rego:3", "context_not_in_schema pol/ops.rego:3"}, places(out.Findings), stdout)
	require.NotEmpty(t, out.Findings)
	for _, want := range []string{
		"policycheck.rules.guard.deny reads input.context.gruop, which the context_schema of registry registry.yaml does not list",
		`(its properties: "group")`,
		"refused as bad input",
		`add "gruop" to its properties`,
	} {
		assert.Contains(t, out.Findings[0].Message, want)
	}

	// Without a context_schema, context reads are not checked.
	writeFile(t, dir, "plain.yaml", "capabilities:\n  - id: ops\ntools:\n  - name: get_time\n")
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "plain.yaml", "--format", "json")
	assert.Equal(t, cli.ExitOK, code, stdout)
}

// TestContextSchemaIsCompiledWhereTheRegistryLoads: a context_schema
// that is not a valid JSON Schema, refers outside itself, or expands past
// the argument schemas' bound is refused when the registry loads (exit 2,
// the registry file and the pointer), before any context is read.
func TestContextSchemaIsCompiledWhereTheRegistryLoads(t *testing.T) {
	bomb := "context_schema:\n  $ref: '#/$defs/d0'\n  $defs:\n"
	for i := range 16 {
		bomb += fmt.Sprintf("    d%d: {anyOf: [{$ref: '#/$defs/d%d'}, {$ref: '#/$defs/d%d'}]}\n", i, i+1, i+1)
	}
	bomb += "    d16: {type: object}\n"
	dir := t.TempDir()
	hist := writeFile(t, dir, "h.json", approvalHistory("dev", "get_time"))
	for _, tc := range []struct{ note, registry, want string }{
		{"not a valid schema", "context_schema: {type: 5}\n", ": /context_schema/type: context_schema is not a valid JSON Schema"},
		{"not an object", "context_schema: true\n", ": /context_schema: "},
		{"a $ref to another document", "context_schema: {$ref: 'https://example.com/s.json'}\n", ": /context_schema: context_schema does not compile"},
		{"past the expansion bound", bomb, ": /context_schema/$defs/d4: context_schema expands to more than 10000 subschemas"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			reg := writeFile(t, t.TempDir(), "registry.yaml", tc.registry+"tools:\n  - name: get_time\n")
			res := run(t, "", "eval", "--registry", reg, "--history", hist, "--context", `{"group": "admin"}`)
			assert.Equal(t, 2, res.code, res.stdout)
			assert.Empty(t, res.stdout)
			assert.Contains(t, res.stderr, reg+tc.want)
		})
	}
}
