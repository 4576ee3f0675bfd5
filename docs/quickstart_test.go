package docs_test

import (
	"encoding/json"
	"os"
	"regexp"
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
