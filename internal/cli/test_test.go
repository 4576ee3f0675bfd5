package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// policyRun runs the command line in-process.
func policyRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// policyFiles writes files (path -> content) under a new temporary
// directory and returns it.
func policyFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	return dir
}

type coverageOutput struct {
	Tests []struct {
		Package string `json:"package"`
		Name    string `json:"name"`
		Fail    bool   `json:"fail"`
	} `json:"tests"`
	Coverage struct {
		Coverage float64 `json:"coverage"`
		Files    map[string]struct {
			Coverage float64 `json:"coverage"`
		} `json:"files"`
	} `json:"coverage"`
}

// The shipped policies' own unit tests pass under OPA's Go test runner and
// cover at least 95% of the shipped policies.
func TestShippedPolicyTestsPassWithCoverage(t *testing.T) {
	code, stdout, stderr := policyRun(t, "test", "../../policies", "--coverage", "--threshold", "95", "--format", "json",
		"--timeout", "2m") // generous: the race detector on two busy cores
	require.Equal(t, cli.ExitOK, code, stderr)
	var out coverageOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	assert.GreaterOrEqual(t, len(out.Tests), 30)
	for _, tc := range out.Tests {
		assert.False(t, tc.Fail, "%s.%s", tc.Package, tc.Name)
	}
	assert.GreaterOrEqual(t, out.Coverage.Coverage, 95.0)
	for _, f := range []string{"availability/availability.rego", "lib/gate.rego", "lib/lib.rego"} {
		assert.Contains(t, out.Coverage.Files, "../../policies/"+f)
	}
	for name := range out.Coverage.Files {
		assert.False(t, strings.HasSuffix(name, "_test.rego"), "tests are not counted in coverage: %s", name)
	}
	t.Logf("shipped policy coverage: %.2f%% over %d tests", out.Coverage.Coverage, len(out.Tests))
}

// Everything the repository ships passes under policycheck test on the
// paths CI names: the shipped policies, the scenario suites and the
// examples (whose histories and registry are not data: only data.json is).
func TestRepositoryRegoTestsPass(t *testing.T) {
	code, stdout, stderr := policyRun(t, "test", "../../policies", "../../policy_test", "../../examples", "--timeout", "2m")
	require.Equal(t, cli.ExitOK, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "PASS:")
	assert.NotContains(t, stdout, "FAIL")
}

const operatorPolicy = `# METADATA
# title: ops
# description: test fixture
package policycheck.rules.ops

import data.policycheck.lib

# METADATA
# title: hide
# description: hides tools of the vault for guests
hide contains name if {
	input.context.group == "guest"
	some name in lib.own_tools(input.tools, "vault")
}
`

const operatorTest = `package policycheck.rules.ops_test

import data.policycheck.rules.ops

tools := [{"name": "secret_op", "capability": "vault"}, {"name": "get_time", "capability": null}]

test_guests_lose_vault_tools if {
	ops.hide == {"secret_op"} with input as {"tools": tools, "context": {"group": "guest"}}
}

test_admins_keep_everything if {
	count(ops.hide) == 0 with input as {"tools": tools, "context": {"group": "admin"}}
}

test_limit_comes_from_data if {
	data.limits.max == 3
}
`

func TestTestCommand(t *testing.T) {
	// An operator's directory: a policy importing the shipped library, its
	// tests, a data.json (loaded) and a history (ignored, as in a bundle).
	ops := policyFiles(t, map[string]string{
		"ops.rego":             operatorPolicy,
		"ops_test.rego":        operatorTest,
		"limits/data.json":     `{"max": 3}`,
		"histories/run-1.json": `[{"kind": "request", "parts": []}]`,
	})
	failing := policyFiles(t, map[string]string{
		"f_test.rego": "package f_test\n\ntest_ok if true\n\ntest_broken if {\n\t1 == 2\n}\n",
	})
	cases := []struct {
		note       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		notStdout  []string
		jsonTests  int
		jsonFailed int
	}{
		{note: "operator tests pass with the shipped library available",
			args: []string{"test", ops}, code: cli.ExitOK, stdout: []string{"PASS: 3/3"}},
		{note: "--run keeps the tests whose name matches",
			args: []string{"test", ops, "--run", "guests", "-v"}, code: cli.ExitOK,
			stdout: []string{"test_guests_lose_vault_tools: PASS", "PASS: 1/1"}, notStdout: []string{"test_admins"}},
		{note: "a --run that matches nothing still passes",
			args: []string{"test", ops, "--run", "no_such_test"}, code: cli.ExitOK, stderr: []string{"policycheck: no tests ran"}},
		{note: "--fail-on-empty fails a run in which no test ran",
			args: []string{"test", ops, "--run", "no_such_test", "--fail-on-empty"}, code: cli.ExitFailed, stderr: []string{"no tests ran"}},
		{note: "--fail-on-empty passes a run in which tests ran",
			args: []string{"test", ops, "--fail-on-empty"}, code: cli.ExitOK, stdout: []string{"PASS: 3/3"}},
		{note: "a failing test exits 1 and is named",
			args: []string{"test", failing}, code: cli.ExitFailed, stdout: []string{"data.f_test.test_broken: FAIL", "FAIL: 1/2"}},
		{note: "json output lists every result",
			args: []string{"test", failing, "--format", "json"}, code: cli.ExitFailed, jsonTests: 2, jsonFailed: 1},
		{note: "coverage below the threshold fails",
			args: []string{"test", ops, "--run", "admins", "--threshold", "100"}, code: cli.ExitFailed,
			stdout: []string{"coverage:"}, stderr: []string{"below the threshold 100.00%"}},
		{note: "coverage at the threshold passes",
			args: []string{"test", ops, "--coverage", "--threshold", "100"}, code: cli.ExitOK,
			stdout: []string{"100.00%", "ops.rego"}, notStdout: []string{"ops_test.rego"}},
		{note: "without the shipped policies the library import does not compile",
			args: []string{"test", ops, "--no-defaults"}, code: cli.ExitBadUsage,
			stderr: []string{"ops.rego:13:15: rego_type_error: undefined function data.policycheck.lib.own_tools"}},
		{note: "an unknown format is a usage error",
			args: []string{"test", ops, "--format", "xml"}, code: cli.ExitBadUsage, stderr: []string{"--format"}},
		{note: "a bad --run expression is a usage error",
			args: []string{"test", ops, "--run", "("}, code: cli.ExitBadUsage, stderr: []string{"--run"}},
		{note: "a threshold above 100 is a usage error",
			args: []string{"test", ops, "--threshold", "101"}, code: cli.ExitBadUsage, stderr: []string{"--threshold"}},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			code, stdout, stderr := policyRun(t, tc.args...)
			assert.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			for _, s := range tc.stdout {
				assert.Contains(t, stdout, s)
			}
			for _, s := range tc.notStdout {
				assert.NotContains(t, stdout, s)
			}
			for _, s := range tc.stderr {
				assert.Contains(t, stderr, s)
			}
			if tc.jsonTests > 0 {
				var results []struct {
					Fail bool `json:"fail"`
				}
				require.NoError(t, json.Unmarshal([]byte(stdout), &results))
				assert.Len(t, results, tc.jsonTests)
				n := 0
				for _, r := range results {
					if r.Fail {
						n++
					}
				}
				assert.Equal(t, tc.jsonFailed, n)
			}
		})
	}
}

func TestTestCommandReportsUncompilablePolicies(t *testing.T) {
	cases := []struct {
		note  string
		files map[string]string
		want  string
	}{
		{note: "a syntax error names file, row and column",
			files: map[string]string{"bad.rego": "package bad\n\np if {\n"},
			want:  "bad.rego:4:0: rego_parse_error"},
		{note: "an unsafe variable names file, row and column",
			files: map[string]string{"bad.rego": "package bad\n\np if {\n\tx\n}\n"},
			want:  "bad.rego:4:2: rego_unsafe_var_error"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			dir := policyFiles(t, tc.files)
			code, _, stderr := policyRun(t, "test", dir)
			assert.Equal(t, cli.ExitBadUsage, code)
			assert.Contains(t, stderr, tc.want)
		})
	}
}

// policycheck test without PATH, from the repository root, tests the
// project as its README says (policies/, policy_test/, examples/), skips
// testdata (where a deliberately broken module lives), and passes.
func TestTestWithoutPathTestsTheProject(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	code, stdout, stderr := policyRun(t, "test", "--timeout", "2m")
	require.Equal(t, cli.ExitOK, code, "%s\n%s", stdout, stderr)
	_, named, _ := policyRun(t, "test", "policies/", "policy_test/", "examples/", "--timeout", "2m")
	assert.Equal(t, named, stdout, "the same run as naming the top-level directories")
	assert.Regexp(t, `PASS: \d+/\d+\n$`, stdout)
	assert.NotContains(t, stdout, "FAIL")

	// Named explicitly, a testdata directory is tested.
	code, _, stderr = policyRun(t, "test", "internal/cli/testdata/policy_syntax")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stderr, "broken.rego")
}

func TestTestWithoutPathInAnOperatorProject(t *testing.T) {
	dir := policyFiles(t, map[string]string{
		"pol/x.rego":               "package x\n\nallow if input.a == 1\n",
		"pol/x_test.rego":          "package x_test\n\nimport data.x\n\ntest_allow if x.allow with input as {\"a\": 1}\n",
		"pol/limits/data.json":     `{"max": 3}`,
		"pol/limits_test.rego":     "package limits_test\n\ntest_max if data.limits.max == 3\n",
		"pol/testdata/broken.rego": "package y\n\nbad := [\n",
		"pol/.hidden/broken.rego":  "package z\n\nbad := [\n",
		"pol/.scratch.rego":        "package w\n\nbad := [\n",
		"root_test.rego":           "package r_test\n\ntest_root if data.limit == 3\n",
		"data.json":                `{"limit": 3}`,
		"notes/readme.txt":         "no Rego here",
	})
	t.Chdir(dir)
	code, stdout, stderr := policyRun(t, "test")
	require.Equal(t, cli.ExitOK, code, "%s\n%s", stdout, stderr)
	assert.Equal(t, "PASS: 3/3\n", stdout)

	empty := t.TempDir()
	t.Chdir(empty)
	code, _, stderr = policyRun(t, "test")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stderr, "no Rego files under . (testdata, hidden and _ directories skipped): name a PATH")
}

func TestTestProgressOnATerminal(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("package many_test\n\n")
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&b, "test_%d if %d > 0\n\n", i, i+1)
	}
	dir := policyFiles(t, map[string]string{"many_test.rego": b.String()})
	var out bytes.Buffer
	var tty fakeTerminal
	code := cli.Run([]string{"test", dir}, strings.NewReader(""), &out, &tty)
	require.Equal(t, cli.ExitOK, code, tty.String())
	assert.Equal(t, "PASS: 120/120\n", out.String())
	assert.Contains(t, tty.String(), "\rtest: 1/120 (0%)")
	assert.Contains(t, tty.String(), "\rtest: 120/120 (100%)")
	assert.True(t, strings.HasSuffix(tty.String(), "\r\x1b[K"))

	// Piped: nothing on stderr. A small suite: no line on a terminal either.
	code, stdout, stderr := policyRun(t, "test", dir)
	assert.Equal(t, cli.ExitOK, code)
	assert.Equal(t, "PASS: 120/120\n", stdout)
	assert.Empty(t, stderr)
	small := policyFiles(t, map[string]string{"few_test.rego": "package few_test\n\ntest_one if true\n"})
	var tty2 fakeTerminal
	require.Equal(t, cli.ExitOK, cli.Run([]string{"test", small}, strings.NewReader(""), &out, &tty2))
	assert.Empty(t, tty2.String())
}
