package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// check never says ok when it checked nothing, and says which checks it
// skipped.
func TestCheckDoesNotSayOkForNothing(t *testing.T) {
	t.Parallel()
	reg := filepath.Join(examplesDir, "registry.yaml")

	none := run(t, "", "check")
	assert.Equal(t, cli.ExitBadUsage, none.code)
	assert.Empty(t, none.stdout)
	assert.Contains(t, none.stderr, "policycheck: check needs at least one PATH")
	assert.Contains(t, none.stderr, "Run 'policycheck check --help' for usage.")

	empty := t.TempDir()
	res := run(t, "", "check", empty, "--registry", reg)
	assert.Equal(t, cli.ExitBadUsage, res.code)
	assert.Equal(t, empty+": no_policy_files: no policy files (*.rego other than *_test.rego) here: nothing to check\n", res.stdout)

	// A filter for a capability the registry lacks: found with
	// --registry, and without it the output says the check was skipped.
	dir := policyFiles(t, map[string]string{"ghost.rego": "package policycheck.capabilities.ghost\n\nprepare_tools := set()\n"})
	with := run(t, "", "check", dir, "--registry", reg)
	assert.Equal(t, cli.ExitBadUsage, with.code)
	assert.Contains(t, with.stdout, `unknown_capability: filter package for capability "ghost", which the registry does not have`)
	without := run(t, "", "check", dir)
	assert.Equal(t, cli.ExitOK, without.code)
	assert.Equal(t, "ok: 1 policy files, no findings\n"+
		"skipped: capability checks (no --registry): filters for unknown capabilities, evaluated filter results, rules reading call arguments no tool schema requires, tool and capability names, and what the engine refuses were not checked\n",
		without.stdout)
	js := run(t, "", "check", dir, "--format", "json")
	var out struct{ Skipped []string }
	require.NoError(t, json.Unmarshal([]byte(js.stdout), &out))
	require.Len(t, out.Skipped, 1)
	assert.True(t, strings.HasPrefix(out.Skipped[0], "capability checks (no --registry)"))
	withJS := run(t, "", "check", filepath.Join(examplesDir, "policies"), "--registry", reg, "--format", "json")
	assert.Contains(t, withJS.stdout, `"skipped": []`)
}

func TestCheckExplicitTestFile(t *testing.T) {
	t.Parallel()
	vault := filepath.Join(examplesDir, "policies", "vault")
	res := run(t, "", "check", filepath.Join(vault, "vault.rego"), filepath.Join(vault, "vault_test.rego"),
		"--registry", filepath.Join(examplesDir, "registry.yaml"))
	assert.Equal(t, cli.ExitOK, res.code, res.stdout)
	assert.NotContains(t, res.stdout, "vault_test")
	assert.Equal(t, "ok: 2 policy files, registry "+filepath.Join(examplesDir, "registry.yaml")+", no findings\n", res.stdout)

	// A test file named explicitly is still compiled: its mistakes show.
	dir := policyFiles(t, map[string]string{"x_test.rego": "package policycheck.rules.x_test\n\ntest_x if { y := 1 }\n"})
	bad := run(t, "", "check", filepath.Join(dir, "x_test.rego"))
	assert.Equal(t, cli.ExitBadUsage, bad.code)
	assert.Contains(t, bad.stdout, "x_test.rego:3:13: rego_compile_error: assigned var y unused")

	help := run(t, "", "check", "--help")
	assert.Contains(t, help.stdout, "In directories and bundles,\n*_test.rego files are skipped; a test file named on the command line is parsed and compiled")
}

// What the compiler cannot see but an evaluation without the request
// can: rules that fail whatever the request.
func TestCheckFindsRulesThatAlwaysFail(t *testing.T) {
	t.Parallel()
	dir := policyFiles(t, map[string]string{"c.rego": `package policycheck.rules.c

mode := "a"

mode := "b"

limit := 1 / 0

n := to_number("abc")

# Depends on the request: left to run time.
cap := to_number(input.context.limit)

_ok := "fine"

hide contains "get_time" if mode == "a"

hide contains "get_time" if limit > n

hide contains "get_time" if cap > 1
`})
	res := run(t, "", "check", dir, "--registry", filepath.Join(examplesDir, "registry.yaml"))
	assert.Equal(t, cli.ExitBadUsage, res.code)
	file := filepath.Join(dir, "c.rego")
	for _, want := range []string{
		file + ":3:1: rule_always_errors: data.policycheck.rules.c.mode reads nothing from the request and fails whenever it is evaluated, " +
			"so every decision that reaches it fails closed: " + file + ":5: eval_conflict_error",
		file + ":7:1: rule_always_errors: data.policycheck.rules.c.limit ",
		"eval_builtin_error: div: divide by zero",
		file + ":9:1: rule_always_errors: data.policycheck.rules.c.n ",
	} {
		assert.Contains(t, res.stdout, want)
	}
	assert.NotContains(t, res.stdout, "rules.c.cap ")
	assert.NotContains(t, res.stdout, "rules.c._ok ")
	assert.Contains(t, res.stderr, "check: 3 finding(s)")

	help := run(t, "", "check", "--help")
	assert.Contains(t, help.stdout, "What check cannot see: failures that depend on the input of a request. Complete rules that conflict\nonly for some inputs")
}

// A package the engine never reads: check finds it, eval and serve warn.
func TestUnreadPackageWarns(t *testing.T) {
	t.Parallel()
	dir := policyFiles(t, map[string]string{
		"mine.rego":  "package mine\n\nallow := true\n",
		"util.rego":  "package acme.util\n\nadmins := {\"root\"}\n",
		"rules.rego": "package policycheck.rules.x\n\nimport data.acme.util\n\nhide contains \"get_time\" if input.context.user in util.admins\n",
	})
	mine := filepath.Join(dir, "mine.rego")
	const msg = ":1:1: package_outside_policycheck: package mine is outside the packages the engine reads"

	chk := run(t, "", "check", dir)
	assert.Equal(t, cli.ExitBadUsage, chk.code)
	assert.Contains(t, chk.stdout, mine+msg)
	assert.NotContains(t, chk.stdout, "acme.util", "an imported helper package is read")

	ev := run(t, "", append([]string{"eval", "--policy", dir}, exampleArgs("refund.json")...)...)
	assert.Equal(t, cli.ExitOK, ev.code)
	assert.Equal(t, "policycheck: warning: "+mine+msg+
		" (policycheck.rules.*, policycheck.capabilities.*, policycheck.availability, policycheck.lib*) and no policy imports it: its rules are never evaluated\n", ev.stderr)
	decodeJSON(t, "eval", ev.stdout)

	clean := run(t, "", append([]string{"eval", "--policy", filepath.Join(examplesDir, "policies")}, exampleArgs("refund.json")...)...)
	assert.Empty(t, clean.stderr)

	// serve logs it when it compiles the policies (here before failing to
	// listen on an address that does not resolve).
	srv := run(t, "", "serve", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--policy", dir, "--addr", "256.0.0.1:1")
	assert.Equal(t, cli.ExitBadUsage, srv.code)
	assert.Contains(t, srv.stderr, `level=WARN msg="policy never evaluated" code=package_outside_policycheck file=`+mine)
}
