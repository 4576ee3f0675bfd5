package docs_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's quick start accounts for every call of the example it
// runs: as many calls as it says, and each verdict it names, as eval
// decides them.
func TestReadmeQuickStartAccountsForEveryCall(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)\*\*Run it on the shipped example\*\*(.*?)\n\n`).FindSubmatch(readme)
	require.NotNil(t, m, "the README lost its quick start")
	para := strings.Join(strings.Fields(string(m[1])), " ")

	stdout, stderr, code := run(t, "eval", "--registry", "../examples/registry.yaml", "--history", "../examples/histories/refund.json")
	require.Equal(t, 0, code, stderr)
	var d struct {
		Calls []struct{ Tool, Verdict string }
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &d))
	words := []string{"zero", "one", "two", "three", "four", "five", "six"}
	require.Less(t, len(d.Calls), len(words))
	assert.Contains(t, para, "calls "+words[len(d.Calls)]+" tools")
	executed := 0
	for _, c := range d.Calls {
		assert.Contains(t, para, "`"+c.Tool+"`", "the quick start does not account for %s (%s)", c.Tool, c.Verdict)
		if c.Verdict == "execute" {
			executed++
		}
	}
	assert.Contains(t, para, words[executed]+" execute")
}

// The README says what the test suite needs besides Go: what
// scripts/test.sh and the tests reach for.
func TestReadmeSaysWhatTheSuiteNeeds(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	script, err := os.ReadFile("../scripts/test.sh")
	require.NoError(t, err)
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	text := string(readme)
	// What the scripts install or fetch, each said in the README.
	require.Contains(t, string(script), "apt-get install -y -qq chromium")
	require.Contains(t, string(script), "apt-get install -y -qq libxml2-utils")
	require.Contains(t, string(ci), "apt-get install -y python3")
	require.True(t, strings.Contains(string(script), `go_tool "$tools" "honnef.co/go/tools/cmd/staticcheck@`), "scripts/test.sh fetches staticcheck")
	for _, want := range []string{"**python3**", "**chromium**", "**xmllint**", "network access to the Go module proxy on its first run", "`staticcheck`",
		"and `go mod tidy -diff` are skipped with a note"} {
		assert.Contains(t, text, want)
	}
}

// decisionFingerprint is the JSON decision's fingerprint, whose digest
// changes with any edit of the policies or the registry: compared as a
// digest only, as the pretty format's last line is.
var decisionFingerprint = regexp.MustCompile(`("fingerprint": )"sha256:[0-9a-f]{64}"`)

func maskDigests(s string) string {
	s = fingerprint.ReplaceAllString(s, "${1}<digest>")
	return decisionFingerprint.ReplaceAllString(s, `${1}"<digest>"`)
}

// TestReadmeExample: the README's one example prints what the README
// shows.
func TestReadmeExample(t *testing.T) {
	commands, outputs := consoleExamples(t, "../README.md")
	require.Len(t, commands, 1, "the README's example")
	require.Contains(t, shellCommands(t, "../README.md"), "go run ./cmd/policycheck "+strings.TrimPrefix(commands[0], "policycheck "),
		"the README's example is the output of its first command")
	t.Chdir("..")
	args, err := splitArgs(strings.TrimPrefix(commands[0], "policycheck "))
	require.NoError(t, err)
	stdout, stderr, code := run(t, args...)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, maskDigests(outputs[0]), maskDigests(stdout), "the README's example:\n%s", commands[0])
}

// TestCIRunsTheReadmeTestCommand: .ci/run ends by running exactly the
// README's test command, and the README shows that command once, under
// "Run the whole test suite".
func TestCIRunsTheReadmeTestCommand(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "**Run the whole test suite**")
	require.True(t, ok, "the README lost its test command")
	m := regexp.MustCompile("(?s)```sh\n(.*?)\n```").FindStringSubmatch(rest)
	require.NotNil(t, m, "the README's test command is its next sh block")
	command := m[1]
	require.NotContains(t, command, "\n", "the README's test command is one line")
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	assert.Equal(t, "exec "+command, lines[len(lines)-1], ".ci/run ends by running the README's test command")
	n := 0
	for _, c := range shellCommands(t, "../README.md") {
		if c == command {
			n++
		}
	}
	assert.Equal(t, 1, n, "the README shows its test command once")
}

// TestQuickstart runs every command docs/quickstart.md shows, in order,
// with the installed binary from the repository root as a reader would,
// the sidecar started as the page starts it (on a free port), and
// compares each output with the page's. Its excerpts of the example
// registry and policies are the committed files'.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with go install")
	}
	const page = "quickstart.md"
	registry, err := os.ReadFile("../examples/registry.yaml")
	require.NoError(t, err)
	for _, b := range codeBlocks(t, page, "yaml") {
		assert.Contains(t, string(registry), b, "docs/quickstart.md's registry excerpt is examples/registry.yaml's")
	}
	var policies []string
	require.NoError(t, filepath.WalkDir("../examples/policies", func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".rego") {
			b, err := os.ReadFile(p)
			policies = append(policies, string(b))
			return err
		}
		return err
	}))
	for _, b := range codeBlocks(t, page, "rego") {
		assert.True(t, slices.ContainsFunc(policies, func(p string) bool { return strings.Contains(p, b) }),
			"docs/quickstart.md's Rego is not in examples/policies:\n%s", b)
	}

	var serve []string
	for _, c := range shellCommands(t, page) {
		require.True(t, strings.HasPrefix(c, "policycheck serve "), "docs/quickstart.md: a command shown outside a console block: %q", c)
		serve = append(serve, c)
	}
	require.Len(t, serve, 1, "docs/quickstart.md starts the sidecar once")
	commands, outputs := consoleExamples(t, page)
	require.GreaterOrEqual(t, len(commands), 8, "docs/quickstart.md lost steps")
	bin := installed(t)
	base, stop := startServe(t, bin, serve[0])
	defer stop()
	curls := 0
	for i, c := range commands {
		switch {
		case strings.HasPrefix(c, "policycheck "):
		case strings.HasPrefix(c, "curl "):
			require.Contains(t, c, "http://127.0.0.1:8181/", "docs/quickstart.md's request reaches the page's sidecar")
			c = strings.Replace(c, "http://127.0.0.1:8181", base, 1)
			curls++
		default:
			t.Fatalf("docs/quickstart.md: a command that is neither policycheck nor curl: %q", c)
		}
		stdout, stderr, code := sh(bin, c)
		require.Equal(t, 0, code, "%s\n%s", c, stderr)
		assert.Equal(t, maskDigests(outputs[i]), maskDigests(stdout), "docs/quickstart.md shows the output of\n%s\nas\n%s\nit prints\n%s", commands[i], outputs[i], stdout)
	}
	assert.Equal(t, 1, curls, "docs/quickstart.md asks the sidecar once")
}
