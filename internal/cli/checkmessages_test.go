package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// checkIn writes files into a temporary directory and runs check there.
func checkIn(t *testing.T, files map[string]string, args ...string) result {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	t.Chdir(dir)
	return run(t, "", append([]string{"check"}, args...)...)
}

// TestCheckSaysWhatWasWritten (issue 48, item 8): check names a rule as
// written (deny[tool], not the compiler's deny[__local0__]), reports a
// prepare_tools whose values are arrays once, naming each value, and says
// that a rule reading an argument the tool's schema forbids
// (additionalProperties: false, no such property) can never fire.
func TestCheckSaysWhatWasWritten(t *testing.T) {
	t.Run("deny[tool] as written", func(t *testing.T) {
		res := checkIn(t, map[string]string{"rules.rego": "package policycheck.rules.refunds\n\n" +
			"deny[tool] if {\n\ttool := input.call.tool\n\ttool == \"issue_refund\"\n}\n"}, "rules.rego")
		require.Equal(t, cli.ExitBadUsage, res.code, res.stderr)
		assert.Contains(t, res.stdout, "rules.rego:3:1: rule_place: policycheck.rules.refunds.deny[tool]: deny is defined as an object (deny[tool])")
		assert.NotContains(t, res.stdout, "__local")
	})
	t.Run("an array prepare_tools once", func(t *testing.T) {
		res := checkIn(t, map[string]string{"vault.rego": "package policycheck.capabilities.vault\n\n" +
			"prepare_tools := [\"secret_op\"] if input.context.group == \"admin\"\n\nelse := []\n"}, "vault.rego")
		require.Equal(t, cli.ExitBadUsage, res.code, res.stderr)
		assert.Equal(t, 1, strings.Count(res.stdout, "rule_shape"), res.stdout)
		assert.Contains(t, res.stdout, `vault.rego:3:18: rule_shape: policycheck.capabilities.vault.prepare_tools yields ["secret_op"] (array[any]), and at vault.rego:5:9 [] (array[any]), which is not accepted`)
	})
	reg := `tools:
  - name: issue_refund
    parameters_json_schema:
      type: object
      properties: {order_id: {type: integer}, amount: {type: number}}
      required: [order_id, amount]
      additionalProperties: false
  - name: archive_order
    parameters_json_schema:
      type: object
      properties: {order_id: {type: integer}, currency: {type: string}}
      required: [order_id]
`
	t.Run("a forbidden argument: the rule can never fire", func(t *testing.T) {
		res := checkIn(t, map[string]string{"registry.yaml": reg, "rules.rego": "package policycheck.rules.refunds\n\n" +
			"deny contains \"big\" if {\n\tinput.call.tool == \"issue_refund\"\n\tinput.call.args.amont > 100\n}\n"},
			"rules.rego", "--registry", "registry.yaml")
		require.Equal(t, cli.ExitBadUsage, res.code, res.stderr)
		assert.Contains(t, res.stdout, `rules.rego:5:2: args_forbidden: policycheck.rules.refunds.deny reads input.call.args.amont, `+
			`which the parameters_json_schema of "issue_refund" in registry registry.yaml forbids (additionalProperties: false; its properties: "amount", "order_id"): `+
			`a call carrying it is invalid_args before any rule, so this rule can never fire`)
		assert.NotContains(t, res.stdout, "args_not_required", "one finding, not also a missing requirement")
	})
	t.Run("forbidden for one tool, optional for another", func(t *testing.T) {
		res := checkIn(t, map[string]string{"registry.yaml": reg, "rules.rego": "package policycheck.rules.refunds\n\n" +
			"deny contains \"eur\" if {\n\tinput.call.args.currency == \"EUR\"\n}\n"},
			"rules.rego", "--registry", "registry.yaml")
		require.Equal(t, cli.ExitBadUsage, res.code, res.stderr)
		assert.Contains(t, res.stdout, `rules.rego:4:2: args_forbidden: policycheck.rules.refunds.deny reads input.call.args.currency, `+
			`which the parameters_json_schema of "issue_refund" in registry registry.yaml forbids (additionalProperties: false; its properties: "amount", "order_id"): `+
			`a call carrying it is invalid_args before any rule, so this rule never fires for "issue_refund"`)
		assert.Contains(t, res.stdout, `rules.rego:4:2: args_not_required: policycheck.rules.refunds.deny reads input.call.args.currency: this rule does not apply when the model omits currency. `+
			`It applies to every registry tool (its body compares input.call.tool with no constant), and the parameters_json_schema of "archive_order" in registry registry.yaml does not require "currency"`)
	})
}
