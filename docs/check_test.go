package docs_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestTestingCheckExamples runs the check examples docs/testing.md shows,
// from the repository root as the page does, and compares their output
// with the page's: a misspelt tool name is a finding (exit 2).
func TestTestingCheckExamples(t *testing.T) {
	commands, outputs := consoleExamples(t, "testing.md")
	require.NotEmpty(t, commands, "docs/testing.md lost its check example")
	t.Chdir("..")
	for i, c := range commands {
		rest, ok := strings.CutPrefix(c, "policycheck check ")
		require.True(t, ok, c)
		args, err := splitArgs(rest)
		require.NoError(t, err, c)
		stdout, stderr, code := run(t, append([]string{"check"}, args...)...)
		assert.Equal(t, cli.ExitBadUsage, code, "%s\n%s", c, stderr)
		assert.Equal(t, outputs[i], stdout, "docs/testing.md shows the output of\n%s\nas\n%s\nit prints\n%s", c, outputs[i], stdout)
	}
}
