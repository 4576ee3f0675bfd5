package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// A new user's first hour: the version, the shared --format vocabulary,
// inline --context, gating a pipeline, help that says only what is true,
// and errors that say what was expected.

func exampleArgs(history string) []string {
	return []string{"--registry", filepath.Join(examplesDir, "registry.yaml"),
		"--history", filepath.Join(examplesDir, "histories", history)}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	res := run(t, "", "version")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 3, res.stdout)
	assert.Regexp(t, `^policycheck \S+`, lines[0])
	assert.Regexp(t, `^OPA v1\.\d+\.\d+`, lines[1], "the OPA module version from the build info")
	assert.Equal(t, "Go "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH, lines[2])

	js := run(t, "", "version", "--format", "json")
	require.Equal(t, cli.ExitOK, js.code, js.stderr)
	var v map[string]string
	require.NoError(t, json.Unmarshal([]byte(js.stdout), &v))
	assert.Equal(t, runtime.Version(), v["go"])
	assert.Equal(t, strings.TrimPrefix(lines[1], "OPA "), v["opa"])
	assert.NotEmpty(t, v["version"])

	extra := run(t, "", "version", "now")
	assert.Equal(t, cli.ExitBadUsage, extra.code)
	assert.Contains(t, extra.stderr, `unexpected argument "now"`)
}

func TestInlineContext(t *testing.T) {
	t.Parallel()
	// The vault filter keeps rotate_key for admins only: the inline
	// context and the same context from a file decide alike.
	base := append([]string{"eval", "--policy", filepath.Join(examplesDir, "policies")}, exampleArgs("vault-rotate.json")...)
	file := run(t, "", append(base, "--context", filepath.Join(examplesDir, "context", "admin.json"))...)
	require.Equal(t, cli.ExitOK, file.code, file.stderr)
	inline := run(t, "", append(base, "--context", `{"user": "root", "group": "admin", "approval": true}`)...)
	require.Equal(t, cli.ExitOK, inline.code, inline.stderr)
	assert.Equal(t, file.stdout, inline.stdout, "inline JSON and the same JSON from a file decide alike")
	support := run(t, "", append(base, "--context", ` {"group":"support"}`)...)
	require.Equal(t, cli.ExitOK, support.code, support.stderr)
	assert.NotEqual(t, file.stdout, support.stdout, "the inline context reached the policies")

	bad := run(t, "", append(base, "--context", `{"group": }`)...)
	assert.Equal(t, cli.ExitBadUsage, bad.code)
	assert.Contains(t, bad.stderr, "policycheck: --context: /group: invalid JSON: unexpected character '}'")
	notObj := run(t, "", append(base, "--context", `{"a":1} [1]`)...)
	assert.Equal(t, cli.ExitBadUsage, notObj.code)
	assert.Contains(t, notObj.stderr, "--context: (root): invalid JSON: unexpected data after the context object")

	help := run(t, "", "eval", "--help")
	assert.Contains(t, help.stdout, `--context string`)
	assert.Contains(t, help.stdout, `inline JSON ('{"group":"admin"}'), a JSON file, or - for stdin`)
}

func TestEvalFailOnRefusal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := filepath.Join("testdata", "registry.yaml")
	allExecute := writeFile(t, dir, "ok.json", hist(req(userPrompt), resp(callTime)))
	asRequest := writeFile(t, dir, "req.json", hist(req(userPrompt)))

	for _, tc := range []struct {
		note string
		args []string
		code int
		msg  string
	}{
		{"two of five calls refused", exampleArgs("refund.json"), cli.ExitRefused, "--fail-on-refusal: 2 of 5 calls refused, first secret_op (not_available_yet)"},
		{"every call executes", []string{"--registry", reg, "--history", allExecute}, cli.ExitOK, ""},
		{"no calls: the history ends with a request", []string{"--registry", reg, "--history", asRequest}, cli.ExitOK, ""},
		{"the decision failed closed", append(exampleArgs("refund.json"), "--policy", filepath.Join("testdata", "policy_failclosed", "docs.rego")),
			cli.ExitRefused, "--fail-on-refusal: the decision failed closed: "},
	} {
		t.Run(tc.note, func(t *testing.T) {
			plain := run(t, "", append([]string{"eval"}, tc.args...)...)
			require.Equal(t, cli.ExitOK, plain.code, "without the flag a decision is exit 0: %s", plain.stderr)
			gated := run(t, "", append([]string{"eval", "--fail-on-refusal"}, tc.args...)...)
			assert.Equal(t, tc.code, gated.code, gated.stderr)
			assert.Equal(t, plain.stdout, gated.stdout, "the decision is printed all the same")
			if tc.msg != "" {
				assert.Contains(t, gated.stderr, "policycheck: "+tc.msg)
			} else {
				assert.Empty(t, gated.stderr)
			}
		})
	}
	help := run(t, "", "eval", "--help")
	assert.Contains(t, help.stdout, "\n  3  with --fail-on-refusal: a call was refused or the decision failed closed")
}

func TestFormatVocabulary(t *testing.T) {
	t.Parallel()
	args := exampleArgs("refund.json")
	evalJSON := run(t, "", append([]string{"eval"}, args...)...)
	require.Equal(t, cli.ExitOK, evalJSON.code, evalJSON.stderr)
	assert.Equal(t, evalJSON.stdout, run(t, "", append([]string{"eval", "--format", "json"}, args...)...).stdout,
		"eval's default stays the JSON document")

	pretty := run(t, "", append([]string{"eval", "--format", "pretty"}, args...)...)
	require.Equal(t, cli.ExitOK, pretty.code, pretty.stderr)
	d := decodeJSON(t, "eval", evalJSON.stdout)
	for _, want := range []string{
		"Available (7): get_order, get_time, issue_refund, load_capability, search_docs, search_tools, transfer_funds\n",
		"Calls (5):\n",
		"  c4 secret_op -> not_available_yet\n",
		"  c5 delete_everything -> unknown_tool\n      model is told: Unknown tool name: 'delete_everything'.",
		"Filter-cache fingerprint (active capabilities, context, policy and registry revisions; not the history): " + d["fingerprint"].(string) + "\n",
	} {
		assert.Contains(t, pretty.stdout, want)
	}

	// Former names are kept as aliases and print the same.
	for _, pair := range [][2][]string{
		{{"explain"}, {"explain", "--format", "pretty"}},
		{{"explain", "--format", "text"}, {"explain", "--format", "pretty"}},
		{{"facts"}, {"facts", "--format", "json"}},
		{{"facts", "--format", "facts"}, {"facts", "--format", "json"}},
	} {
		a := run(t, "", append(pair[0], args...)...)
		b := run(t, "", append(pair[1], args...)...)
		require.Equal(t, cli.ExitOK, a.code, a.stderr)
		assert.Equal(t, b.stdout, a.stdout, "%v and %v", pair[0], pair[1])
	}
	for _, pair := range [][2][]string{
		{{"check", "--format", "text"}, {"check", "--format", "pretty"}},
		{{"check"}, {"check", "-f", "pretty"}},
	} {
		p := filepath.Join(examplesDir, "policies")
		a := run(t, "", append(pair[0], p)...)
		b := run(t, "", append(pair[1], p)...)
		assert.Equal(t, b, a, "%v and %v", pair[0], pair[1])
	}

	// Every command names the formats it takes, in the same words.
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"eval"}, `--format must be json or pretty, not "yaml"`},
		{[]string{"explain"}, `--format must be pretty, json or html, not "yaml"`},
		{[]string{"facts"}, `--format must be json or input, not "yaml"`},
		{[]string{"check"}, `--format must be pretty, json or junit, not "yaml"`},
		{[]string{"test"}, `--format must be pretty, json or junit, not "yaml"`},
		{[]string{"version"}, `--format must be pretty or json, not "yaml"`},
	} {
		a := append(append([]string{}, tc.cmd...), "--format", "yaml")
		if tc.cmd[0] != "check" && tc.cmd[0] != "test" && tc.cmd[0] != "version" {
			a = append(a, args...)
		}
		res := run(t, "", a...)
		assert.Equal(t, cli.ExitBadUsage, res.code, "%v", a)
		assert.Contains(t, res.stderr, tc.want, "%v", a)
	}
}

func TestHelpSaysOnlyWhatIsTrue(t *testing.T) {
	t.Parallel()
	codes := regexp.MustCompile(`(?m)^  ([0-9])  `)
	for _, tc := range []struct {
		cmd   string
		codes []string
	}{
		{"eval", []string{"0", "2", "3"}},
		{"explain", []string{"0", "2"}},
		{"facts", []string{"0", "2"}},
		{"registry", []string{"0", "2"}},
		{"conformance", []string{"0", "1", "2"}},
		{"test", []string{"0", "1", "2"}},
		{"check", []string{"0", "2"}},
		{"serve", []string{"0", "2"}},
		{"version", []string{"0", "2"}},
	} {
		res := run(t, "", tc.cmd, "--help")
		require.Equal(t, cli.ExitOK, res.code, tc.cmd)
		assert.NotContains(t, res.stdout, "[=true|false]", "%s: bool flags print plainly", tc.cmd)
		i := strings.Index(res.stdout, "Exit codes:\n")
		require.GreaterOrEqual(t, i, 0, "%s --help has no exit codes", tc.cmd)
		assert.Equal(t, "\n\n", res.stdout[i-2:i], "%s: the exit codes are set off by a blank line", tc.cmd)
		block := res.stdout[i:]
		block = block[:strings.Index(block, "\n\n")]
		var got []string
		for _, m := range codes.FindAllStringSubmatch(block, -1) {
			got = append(got, m[1])
		}
		assert.Equal(t, tc.codes, got, "%s: exit codes listed\n%s", tc.cmd, block)
	}
	res := run(t, "", "eval", "--help")
	assert.Regexp(t, `(?m)^      --no-defaults +do not load`, res.stdout)

	bad := run(t, "", "check", "--regsitry", "r.yaml")
	assert.Equal(t, cli.ExitBadUsage, bad.code)
	assert.Equal(t, "policycheck: unknown flag: --regsitry\nRun 'policycheck check --help' for usage.\n", bad.stderr)
	unknown := run(t, "", "evl")
	assert.Equal(t, cli.ExitBadUsage, unknown.code)
	assert.Contains(t, unknown.stderr, "Run 'policycheck --help' for usage.")
	extra := run(t, "", "conformance", "a", "b")
	assert.Equal(t, cli.ExitBadUsage, extra.code)
	assert.Contains(t, extra.stderr, `unexpected argument "b": policycheck conformance takes only one argument, the directory of cases`)
}

func TestNotAPydanticHistorySaysWhatIsExpected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := filepath.Join(examplesDir, "registry.yaml")
	openai := writeFile(t, dir, "openai.json", `[{"role":"system","content":"be nice"},{"role":"user","content":"hi"}]`)
	object := writeFile(t, dir, "object.json", `{"messages": []}`)
	for _, tc := range []struct{ file, want string }{
		{openai, openai + `: /0: missing required key "kind"; this looks like an OpenAI-style message list ("role", "content"), not pydantic-ai's; ` +
			`a history is a pydantic-ai ModelMessagesTypeAdapter dump, a JSON list of {"kind": "request"|"response", "parts": [...]} messages (docs/input.md, "The history", shows one)`},
		{object, object + `: (root): a history must be an array of messages; a history is a pydantic-ai ModelMessagesTypeAdapter dump`},
	} {
		for _, extra := range [][]string{nil, {"--no-schema"}} {
			res := run(t, "", append([]string{"eval", "--registry", reg, "--history", tc.file}, extra...)...)
			assert.Equal(t, cli.ExitBadUsage, res.code)
			assert.Contains(t, res.stderr, "policycheck: "+tc.want, "%v", extra)
		}
	}
	// The docs it points at do show one.
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "input.md"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), "## The history\n")
	assert.Contains(t, string(doc), "ModelMessagesTypeAdapter")
}

func TestExplainWording(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs(filepath.Join(examplesDir, "policies"))
	require.NoError(t, err)
	res := run(t, "", append([]string{"explain", "--policy", abs}, exampleArgs("refund.json")...)...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "  "+filepath.Join(abs, "vault", "vault.rego")+" (data.policycheck.capabilities.vault): capability filter",
		"an absolute --policy path keeps its leading /")
	assert.Contains(t, res.stdout, "Dispatch: the last message (5) is a response served by \"anthropic\": anchored window from message 0, part 0; it sees no reveal or load beyond the conservative window\n")

	// A provider that still sees a load and a reveal the conservative
	// window no longer holds.
	raw, err := os.ReadFile(filepath.Join("testdata", "conformance", "anchored-capability-tool-foreign-provider.json"))
	require.NoError(t, err)
	var c struct{ Registry, History json.RawMessage }
	require.NoError(t, json.Unmarshal(raw, &c))
	dir := t.TempDir()
	anchored := run(t, "", "explain", "--registry", writeFile(t, dir, "registry.json", string(c.Registry)),
		"--history", writeFile(t, dir, "history.json", string(c.History)))
	require.Equal(t, cli.ExitOK, anchored.code, anchored.stderr)
	assert.Contains(t, anchored.stdout, `Dispatch: the last message (4) is a response served by "openai": anchored window from message 0, part 0; `+
		`beyond the conservative window, that provider still sees tools revealed "guarded_tool" and capabilities loaded "guarded"`+"\n")
	assert.NotContains(t, anchored.stdout, "could still see: discovered [")
}

// fakeTerminal is a stderr that says it is a terminal.
type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

func TestConformanceProgress(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile(filepath.Join("testdata", "conformance", "anchored-capability-tool-foreign-provider.json"))
	require.NoError(t, err)
	dir := t.TempDir()
	for _, n := range []string{"a.json", "b.json", "c.json"} {
		writeFile(t, dir, n, string(good))
	}
	var out bytes.Buffer
	var tty fakeTerminal
	code := cli.Run([]string{"conformance", dir}, strings.NewReader(""), &out, &tty)
	require.Equal(t, cli.ExitOK, code, tty.String())
	assert.Equal(t, "3 passed, 0 failed\n", out.String(), "stdout holds no progress")
	assert.Contains(t, tty.String(), "\rconformance: 1/3 (33%)")
	assert.Contains(t, tty.String(), "\rconformance: 3/3 (100%)")
	assert.True(t, strings.HasSuffix(tty.String(), "\r\x1b[K"), "the progress line is erased at the end: %q", tty.String())

	piped := run(t, "", "conformance", dir)
	assert.Equal(t, cli.ExitOK, piped.code)
	assert.Empty(t, piped.stderr, "piped, nothing is added")
}
