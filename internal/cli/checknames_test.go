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

// namesRegistry has the tools and capabilities the typos below miss.
const namesRegistry = `capabilities:
  - id: vault
    defer_loading: true
  - id: repos
tools:
  - name: get_time
  - name: delete_repo
    capability: repos
  - name: search_code
    capability: repos
  - name: rotate_key
    capability: vault
`

// TestCheckFindsATypoInAToolName (issue 43, item 10): a string literal a
// rule compares with a tool or capability name (==, !=, in a literal
// set, a key of a set or object indexed by the name, a hide or filter
// result) that no --registry has is a finding, exit 2, naming the
// nearest known name: a deny guarding "delete_repos" never fires for
// delete_repo. Names the registry has are not reported.
func TestCheckFindsATypoInAToolName(t *testing.T) {
	dir := policyFiles(t, map[string]string{"registry.yaml": namesRegistry,
		"pol/repos.rego": `package policycheck.rules.repos

deny contains {"reason": "no", "message": "no"} if input.call.tool == "delete_repos"

deny contains {"reason": "no", "message": "no"} if {
	input.call.tool != "get_tmie"
	input.context.readonly
}

deny contains {"reason": "no", "message": "no"} if input.call.tool in {"delete_repo", "drop_tabel"}

dangerous := {"delete_repo", "force_push"}

deny contains {"reason": "no", "message": "no"} if dangerous[input.call.tool]

limits := {"delete_repo": 1, "serch_code": 3}

deny contains {"reason": "no", "message": "no"} if limits[input.call.tool] > 2

deny contains {"reason": "no", "message": "no"} if {
	some c in input.dispatch.calls
	c.tool == "rotate_kye"
}

deny contains {"reason": "no", "message": "no"} if {
	name := input.call.tool
	name == "delete-repo"
}

deny contains {"reason": "no", "message": "no"} if {
	input.call.tool == "delete_repo"
	"vualt" in input.facts.active_capabilities
}

deny contains {"reason": "no", "message": "no"} if count(input.facts.tool_calls["serch_code"]) > 3

hide contains "serch_code" if input.context.group == "guest"

hide contains "get_time" if input.context.group == "night"
`,
		"pol/vault.rego": `package policycheck.capabilities.vault

prepare_tools contains t.name if {
	some t in input.tools
	t.capability == "vault"
	t.name != "rotate_keys"
}

prepare_tools contains "rotate_kee" if input.context.admin
`,
	})
	t.Chdir(dir)
	code, stdout, stderr := policyRun(t, "check", "pol", "--registry", "registry.yaml", "--format", "json")
	require.Equal(t, cli.ExitBadUsage, code, "%s\n%s", stdout, stderr)
	out := decodeCheckReport(t, stdout)
	got := map[string]string{}
	for _, f := range out.Findings {
		got[places([]checkEntry{f})[0]] = f.Message
	}
	want := map[string]string{
		"unknown_tool_name pol/repos.rego:3":        `"delete_repos" is compared with input.call.tool, but no registry (registry.yaml) has a tool "delete_repos": the comparison never holds for a real one; did you mean "delete_repo"?`,
		"unknown_tool_name pol/repos.rego:6":        `did you mean "get_time"?`,
		"unknown_tool_name pol/repos.rego:10":       `"drop_tabel"`,
		"unknown_tool_name pol/repos.rego:12":       `"force_push"`,
		"unknown_tool_name pol/repos.rego:16":       `did you mean "search_code"?`,
		"unknown_tool_name pol/repos.rego:22":       `did you mean "rotate_key"?`,
		"unknown_tool_name pol/repos.rego:27":       `did you mean "delete_repo"?`,
		"unknown_capability_name pol/repos.rego:32": `no registry (registry.yaml) has a capability "vualt": the comparison never holds for a real one; did you mean "vault"?`,
		"unknown_tool_name pol/repos.rego:35":       `"serch_code"`,
		"unknown_tool_name pol/repos.rego:37":       `policycheck.rules.repos.hide names "serch_code"`,
		"unknown_tool_name pol/vault.rego:6":        `did you mean "rotate_key"?`,
		"unknown_tool_name pol/vault.rego:9":        `did you mean "rotate_key"?`,
	}
	for place, msg := range want {
		if assert.Contains(t, got, place, stdout) {
			assert.Contains(t, got[place], msg, place)
		}
	}
	assert.Len(t, out.Findings, len(want), stdout)

	// The pretty output says the same, one line each.
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "registry.yaml")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stdout, `pol/repos.rego:3:`)
	assert.Contains(t, stdout, `did you mean "delete_repo"?`)

	// A name one registry has and another lacks is a note about the one
	// that lacks it (a policy set may serve several registries), not a
	// finding.
	require.NoError(t, os.WriteFile("other.yaml", []byte(strings.Replace(namesRegistry, "get_time", "get_tmie", 1)), 0o644))
	require.NoError(t, os.WriteFile("pol/repos.rego", []byte("package policycheck.rules.repos\n\n"+
		"deny contains {\"reason\": \"no\", \"message\": \"no\"} if input.call.tool == \"get_tmie\"\n"), 0o644))
	require.NoError(t, os.Remove("pol/vault.rego"))
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "registry.yaml", "--registry", "other.yaml", "--format", "json")
	assert.Equal(t, cli.ExitOK, code, stdout)
	out = decodeCheckReport(t, stdout)
	assert.Equal(t, []string{"unknown_tool_name pol/repos.rego:3"}, places(out.Notes), stdout)
	assert.Contains(t, out.Notes[0].Message, "registry.yaml")
}

// TestCheckStrictMakesNotesFindings: --strict turns every note into a
// finding (exit 2); without it the same policy passes.
func TestCheckStrictMakesNotesFindings(t *testing.T) {
	dir := policyFiles(t, map[string]string{"registry.yaml": namesRegistry,
		"pol/late.rego": "package policycheck.rules.late\n\n" +
			"hide contains \"get_time\" if time.now_ns() > 0\n",
	})
	t.Chdir(dir)
	code, stdout, _ := policyRun(t, "check", "pol", "--registry", "registry.yaml", "--format", "json")
	assert.Equal(t, cli.ExitOK, code, stdout)
	assert.Equal(t, []string{"decision_memo_off pol/late.rego:3"}, places(decodeCheckReport(t, stdout).Notes))

	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "registry.yaml", "--strict", "--format", "json")
	assert.Equal(t, cli.ExitBadUsage, code, stdout)
	out := decodeCheckReport(t, stdout)
	assert.Empty(t, out.Notes)
	assert.Equal(t, []string{"decision_memo_off pol/late.rego:3"}, places(out.Findings))
}

// TestCheckNamesCleanOnShippedPolicies: the shipped policies and every
// example policy set name only tools and capabilities the example
// registries have: no finding and no note from the name check, also
// under --strict.
func TestCheckNamesCleanOnShippedPolicies(t *testing.T) {
	sets, err := filepath.Glob("../../examples/policies/*")
	require.NoError(t, err)
	require.NotEmpty(t, sets)
	args := append([]string{"check", "../../policies"}, sets...)
	args = append(args, "--registry", "../../examples/registry.yaml", "--strict", "--format", "json")
	code, stdout, stderr := policyRun(t, args...)
	assert.Equal(t, cli.ExitOK, code, "%s\n%s", stdout, stderr)
	out := decodeCheckReport(t, stdout)
	assert.Empty(t, out.Findings)
	assert.Empty(t, out.Notes)

	code, stdout, stderr = policyRun(t, "check", "../../examples/policies/vault", "--registry", "../../examples/registries/vault-always-on.yaml", "--strict")
	assert.Equal(t, cli.ExitOK, code, "%s\n%s", stdout, stderr)
}
