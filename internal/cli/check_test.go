package cli_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

const checkRegistry = `capabilities:
  - id: vault
    defer_loading: true
  - id: refunds
    defer_loading: true
tools:
  - name: get_time
  - name: secret_op
    capability: vault
  - name: issue_refund
    capability: refunds
`

// seededMistakes is a policy directory and registries holding the eight
// kinds of mistakes check must find (issue 5, "Done means"), each with
// where it must be reported.
var seededMistakes = []struct {
	note string
	file string
	text string
	// want is the finding: location and code.
	want string
}{
	{note: "a syntax error",
		file: "pol/syntax.rego", text: "package policycheck.rules.syntax\n\nhide contains \"get_time\" if {\n",
		want: "pol/syntax.rego:4:0: rego_parse_error"},
	{note: "a strict-mode error (an unused import)",
		file: "pol/strict.rego",
		text: "package policycheck.rules.strict\n\nimport data.policycheck.lib\n\nhide contains \"get_time\" if input.context.group == \"guest\"\n",
		want: "pol/strict.rego:3:1: rego_compile_error"},
	{note: "a filter for a capability the registry lacks",
		file: "pol/billing.rego",
		text: "package policycheck.capabilities.billing\n\nimport data.policycheck.lib\n\nprepare_tools := lib.names(input.tools)\n",
		want: "pol/billing.rego:1:1: unknown_capability"},
	{note: "a prepare_tools that is not a set of strings",
		file: "pol/vault.rego", text: "package policycheck.capabilities.vault\n\nprepare_tools := [\"secret_op\"]\n",
		want: "pol/vault.rego:3:18: rule_shape"},
	{note: "a nondeterministic built-in in a filter",
		file: "pol/refunds.rego",
		text: "package policycheck.capabilities.refunds\n\nimport data.policycheck.lib\n\n" +
			"prepare_tools := lib.names(input.tools) if {\n\ttime.now_ns() > 0\n}\n",
		want: "pol/refunds.rego:6:2: nondeterministic_builtin"},
	{note: "an operator rule outside the documented packages",
		file: "pol/outside.rego",
		text: "package tools.permissions\n\ndeny contains {\"reason\": \"no\", \"message\": \"no\"} if input.call.tool == \"get_time\"\n",
		want: "pol/outside.rego:1:1: package_outside_policycheck"},
	{note: "a require_approval of a shape the gate does not read",
		file: "pol/approve.rego", text: "package policycheck.rules.approve\n\nrequire_approval if input.call.tool == \"get_time\"\n",
		want: "pol/approve.rego:3:1: rule_shape"},
	{note: "a registry that breaks its schema",
		file: "broken.yaml", text: "capabilities:\n  - id: vault\n    defer_loading: \"yes\"\ntools:\n  - name: get_time\n",
		want: "broken.yaml: /capabilities/0/defer_loading: registry_error"},
	{note: "a registry tool with a reserved name",
		file: "reserved.yaml", text: "tools:\n  - name: search_tools\n  - name: get_time\n",
		want: "reserved.yaml: /tools/0/name: registry_error"},
}

func TestCheckFindsEverySeededMistake(t *testing.T) {
	files := map[string]string{"registry.yaml": checkRegistry}
	for _, m := range seededMistakes {
		files[m.file] = m.text
	}
	dir := policyFiles(t, files)
	t.Chdir(dir)
	code, stdout, stderr := policyRun(t, "check", "pol",
		"--registry", "registry.yaml", "--registry", "broken.yaml", "--registry", "reserved.yaml")
	assert.Equal(t, cli.ExitBadUsage, code, stderr)
	for _, m := range seededMistakes {
		assert.Contains(t, stdout, m.want, m.note)
	}
	assert.Contains(t, stderr, "9 finding(s)")

	// The same findings as JSON, each located.
	code, stdout, _ = policyRun(t, "check", "pol", "--format", "json",
		"--registry", "registry.yaml", "--registry", "broken.yaml", "--registry", "reserved.yaml")
	assert.Equal(t, cli.ExitBadUsage, code)
	out := decodeCheckReport(t, stdout)
	assert.Len(t, out.Findings, len(seededMistakes))
	for _, f := range out.Findings {
		assert.NotEmpty(t, f.File, f.Code)
		assert.True(t, f.Row > 0 || f.Pointer != "", "%s in %s has no location", f.Code, f.File)
	}
}

// Each mistake is found on its own too: one does not hide another.
func TestCheckFindsEachMistakeAlone(t *testing.T) {
	for _, m := range seededMistakes {
		t.Run(m.note, func(t *testing.T) {
			dir := policyFiles(t, map[string]string{"registry.yaml": checkRegistry, m.file: m.text,
				"pol/ok.rego": "package policycheck.rules.ok\n\nhide contains \"nothing\" if false\n"})
			t.Chdir(dir)
			reg := "registry.yaml"
			if m.file == "broken.yaml" || m.file == "reserved.yaml" {
				reg = m.file
			}
			code, stdout, _ := policyRun(t, "check", "pol", "--registry", reg)
			assert.Equal(t, cli.ExitBadUsage, code)
			assert.Contains(t, stdout, m.want)
		})
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		note   string
		files  map[string]string
		args   []string
		code   int
		stdout string
		absent string // not in stdout
	}{
		{note: "the shipped policies and the example registry are clean",
			args: []string{"check", "../../policies", "--registry", "../../examples/registry.yaml"},
			code: cli.ExitOK, stdout: "ok: 6 policy files", absent: "note:"},
		{note: "a rule outside the filters may be nondeterministic, with a note that the memo is off",
			files: map[string]string{"registry.yaml": checkRegistry,
				"late.rego": "package policycheck.rules.late\n\n" +
					"deny contains {\"reason\": \"late\", \"message\": \"too late\"} if time.now_ns() < 0\n"},
			args: []string{"check", "late.rego", "--registry", "registry.yaml"},
			code: cli.ExitOK, stdout: "note: late.rego:3:60: decision_memo_off: data.policycheck.rules.late reaches the nondeterministic built-in time.now_ns"},
		{note: "a filter of open type is evaluated with the registry's tools",
			files: map[string]string{"registry.yaml": checkRegistry,
				"vault.rego": "package policycheck.capabilities.vault\n\nprepare_tools := input.tools\n"},
			args: []string{"check", "vault.rego", "--registry", "registry.yaml"},
			code: cli.ExitBadUsage, stdout: "vault.rego:3:1: prepare_tools_not_a_set"},
		{note: "a set of numbers is not a set of tool names",
			files: map[string]string{"vault.rego": "package policycheck.capabilities.vault\n\nprepare_tools := {1, 2}\n"},
			args:  []string{"check", "vault.rego"},
			code:  cli.ExitBadUsage, stdout: "(set[number]), which is not accepted"},
		{note: "a partial set rule of names is fine",
			files: map[string]string{"registry.yaml": checkRegistry,
				"vault.rego": "package policycheck.capabilities.vault\n\nprepare_tools contains t.name if some t in input.tools\n"},
			args: []string{"check", "vault.rego", "--registry", "registry.yaml"},
			code: cli.ExitOK, stdout: "ok: 1 policy files"},
		{note: "a nondeterministic built-in reached through a helper rule",
			files: map[string]string{"vault.rego": "package policycheck.capabilities.vault\n\n" +
				"late if time.now_ns() > 0\n\nprepare_tools contains t.name if {\n\tsome t in input.tools\n\tlate\n}\n"},
			args: []string{"check", "vault.rego"},
			code: cli.ExitBadUsage, stdout: "vault.rego:3:9: nondeterministic_builtin"},
		{note: "a policy set the engine refuses: no entrypoint without the defaults",
			files: map[string]string{"registry.yaml": checkRegistry,
				"r.rego": "package policycheck.rules.r\n\nhide contains \"get_time\" if false\n"},
			args: []string{"check", "r.rego", "--no-defaults", "--registry", "registry.yaml"},
			code: cli.ExitBadUsage, stdout: "missing_entrypoint"},
		{note: "a missing path is reported",
			args: []string{"check", "does-not-exist.rego"},
			code: cli.ExitBadUsage, stdout: "does-not-exist.rego: load_error"},
		{note: "an unknown format is a usage error",
			args: []string{"check", "--format", "xml"}, code: cli.ExitBadUsage},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			if tc.files != nil {
				t.Chdir(policyFiles(t, tc.files))
			}
			code, stdout, stderr := policyRun(t, tc.args...)
			assert.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stdout, tc.stdout)
			if tc.absent != "" {
				assert.NotContains(t, stdout, tc.absent)
			}
		})
	}
}

// tarGz writes an OPA bundle archive holding files and returns its path.
func tarGz(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, text := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(text))}))
		_, err := tw.Write([]byte(text))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	return p
}

func TestCheckReadsBundleArchives(t *testing.T) {
	reg := filepath.Join(policyFiles(t, map[string]string{"registry.yaml": checkRegistry}), "registry.yaml")
	bundle := tarGz(t, map[string]string{
		"/.manifest":         `{"revision": "7"}`,
		"/caps/vault.rego":   "package policycheck.capabilities.vault\n\nprepare_tools := [\"secret_op\"]\n",
		"/caps/ok_test.rego": "package policycheck.capabilities.vault_test\n\ntest_ok if true\n",
	})
	code, stdout, _ := policyRun(t, "check", bundle, "--registry", reg)
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stdout, bundle+"#caps/vault.rego:3:18: rule_shape")
	assert.NotContains(t, stdout, "ok_test.rego")
}

// A nondeterministic built-in is a finding in a filter (whose results are
// cached) and a note elsewhere (it only turns the decision memo off); a
// helper that both reach is reported once, as the filter's finding.
func TestCheckNotesTheDecisionMemoOff(t *testing.T) {
	dir := policyFiles(t, map[string]string{"registry.yaml": checkRegistry,
		"pol/late.rego": "package policycheck.rules.late\n\n" +
			"deny contains {\"reason\": \"late\", \"message\": \"too late\"} if time.now_ns() < 0\n",
		"pol/helper.rego": "package policycheck.lib.clock\n\nnow := time.now_ns()\n",
		"pol/vault.rego": "package policycheck.capabilities.vault\n\nimport data.policycheck.lib.clock\n\n" +
			"prepare_tools contains t.name if {\n\tsome t in input.tools\n\tclock.now > 0\n}\n",
		"pol/rule.rego": "package policycheck.rules.clocked\n\nimport data.policycheck.lib.clock\n\n" +
			"hide contains \"get_time\" if clock.now < 0\n",
	})
	t.Chdir(dir)
	code, stdout, _ := policyRun(t, "check", "pol", "--registry", "registry.yaml", "--format", "json")
	assert.Equal(t, cli.ExitBadUsage, code)
	out := decodeCheckReport(t, stdout)
	assert.Equal(t, []string{"nondeterministic_builtin pol/helper.rego:3"}, places(out.Findings))
	assert.Equal(t, []string{"decision_memo_off pol/late.rego:3"}, places(out.Notes))

	// Without the filter the check passes, and the notes remain.
	require.NoError(t, os.Remove("pol/vault.rego"))
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "registry.yaml", "--format", "json")
	assert.Equal(t, cli.ExitOK, code, stdout)
	out = decodeCheckReport(t, stdout)
	assert.Empty(t, out.Findings)
	assert.Equal(t, []string{"decision_memo_off pol/helper.rego:3", "decision_memo_off pol/late.rego:3"}, places(out.Notes))
}

// TestCheckNotesAHideOfAToolTheRegistryLacks: a hide rule naming a tool
// no registry given has hides nothing: a finding, with its place and the
// nearest known name (issue 43, item 10; it was a note). A tool one
// registry has and another lacks is a note about the one that lacks it
// (a policy set may serve registries that do have the tool), naming that
// registry, also after one that failed to load.
func TestCheckNotesAHideOfAToolTheRegistryLacks(t *testing.T) {
	dir := policyFiles(t, map[string]string{"registry.yaml": checkRegistry,
		"other.yaml": checkRegistry + "  - name: old_tool\n",
		"pol/ops.rego": "package policycheck.rules.ops\n\n" +
			"hide contains \"get_tiem\" if input.context.group == \"guest\"\n\n" +
			"hide contains \"get_time\" if input.context.group == \"night\"\n",
		"pol/set.rego": "package policycheck.rules.set\n\nhide := {\"get_time\", \"old_tool\"} if input.context.x\n",
	})
	t.Chdir(dir)
	code, stdout, _ := policyRun(t, "check", "pol", "--registry", "registry.yaml", "--format", "json")
	assert.Equal(t, cli.ExitBadUsage, code, stdout)
	out := decodeCheckReport(t, stdout)
	assert.Empty(t, out.Notes)
	require.Len(t, out.Findings, 2, stdout)
	assert.Equal(t, checkEntry{Code: "unknown_tool_name", File: "pol/ops.rego", Row: 3,
		Message: `policycheck.rules.ops.hide names "get_tiem", but no registry (registry.yaml) has a tool "get_tiem": ` +
			`it names nothing; did you mean "get_time"?`}, out.Findings[0])
	assert.Equal(t, "pol/set.rego", out.Findings[1].File)
	assert.Contains(t, out.Findings[1].Message, `"old_tool"`)

	require.NoError(t, os.WriteFile("pol/ops.rego", []byte("package policycheck.rules.ops\n"), 0o644))
	require.NoError(t, os.WriteFile("bad.yaml", []byte("tools: 3\n"), 0o644))
	code, stdout, _ = policyRun(t, "check", "pol", "--registry", "bad.yaml", "--registry", "registry.yaml",
		"--registry", "other.yaml", "--format", "json")
	assert.Equal(t, cli.ExitBadUsage, code, stdout) // bad.yaml
	out = decodeCheckReport(t, stdout)
	require.Len(t, out.Notes, 1, stdout)
	assert.Equal(t, "unknown_tool_name pol/set.rego:3", places(out.Notes)[0])
	assert.Contains(t, out.Notes[0].Message, "which registry registry.yaml does not have (another registry given does): it hides nothing there")
}

type checkEntry struct {
	Code    string `json:"code"`
	File    string `json:"file"`
	Row     int    `json:"row"`
	Pointer string `json:"pointer,omitempty"`
	Message string `json:"message"`
}

// checkReport is policycheck check's --format json document.
type checkReport struct {
	Findings []checkEntry `json:"findings"`
	Notes    []checkEntry `json:"notes"`
}

func decodeCheckReport(t *testing.T, stdout string) checkReport {
	t.Helper()
	var out checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
	return out
}

// places are "code file:row" of each entry.
func places(entries []checkEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = fmt.Sprintf("%s %s:%d", e.Code, e.File, e.Row)
	}
	return out
}

// TestCheckReadsWhatTheEngineReads: entries whose name begins with "."
// are read by neither (a linter's .regal/config.yaml is no stray data), a
// Kubernetes volume's ..<timestamp> directory included, and a policy
// reached through a link is checked once, as the engine loads it once.
func TestCheckReadsWhatTheEngineReads(t *testing.T) {
	dir := policyFiles(t, map[string]string{"registry.yaml": checkRegistry,
		"pol/..2026_12_02_10_00_00/rule.rego": "package policycheck.rules.linked\n\nhide contains \"get_time\" if false\n",
		"pol/.regal/config.yaml":              "rules: {}\n",
	})
	t.Chdir(dir)
	require.NoError(t, os.Symlink("..2026_12_02_10_00_00", filepath.Join("pol", "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "rule.rego"), filepath.Join("pol", "rule.rego")))
	code, stdout, stderr := policyRun(t, "check", "pol", "--registry", "registry.yaml", "--format", "json")
	assert.Equal(t, cli.ExitOK, code, stdout+stderr)
	out := decodeCheckReport(t, stdout)
	assert.Empty(t, out.Findings)
}
