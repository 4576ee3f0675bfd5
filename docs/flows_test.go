package docs_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestFlowsExamples runs every example docs/flows.md shows, from the
// repository root as the page does, and compares its output with the
// page's (the fingerprint's digest, which every policy edit changes, as
// a digest only).
func TestFlowsExamples(t *testing.T) {
	commands, outputs := consoleExamples(t, "flows.md")
	require.GreaterOrEqual(t, len(commands), 2, "docs/flows.md lost examples")
	t.Chdir("..")
	for i, c := range commands {
		rest, ok := strings.CutPrefix(c, "policycheck ")
		require.True(t, ok, c)
		args, err := splitArgs(rest)
		require.NoError(t, err, c)
		stdout, stderr, code := run(t, args...)
		require.Equal(t, cli.ExitOK, code, "%s\n%s", c, stderr)
		want := fingerprint.ReplaceAllString(outputs[i], "${1}<digest>")
		got := fingerprint.ReplaceAllString(stdout, "${1}<digest>")
		assert.Equal(t, want, got, "docs/flows.md shows the output of\n%s\nas\n%s\nit prints\n%s", c, outputs[i], stdout)
	}
}
