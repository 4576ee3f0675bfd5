package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeGoRunExitCodes: docs/reference/commands.md (once the README)
// warns, beside its exit codes,
// that `go run` reports any non-zero exit as 1 (printing "exit status
// 2"), and that is what go run does with check's exit 2.
func TestReadmeGoRunExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command with go run")
	}
	readme, err := os.ReadFile("reference/commands.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "Exit codes (each command's `--help` lists those it can return)")
	require.True(t, ok)
	para, _, _ := strings.Cut(rest, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	assert.Contains(t, para, "`go run` turns exit codes 2 and 3 into 1 (it prints `exit status 2` or `exit status 3`): run the built binary (`go install` or `go build`) where the code matters, as in CI")

	cmd := exec.Command("go", "run", "./cmd/policycheck", "check", "no-such-dir")
	cmd.Dir = ".."
	var e bytes.Buffer
	cmd.Stderr = &e
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, e.String())
	assert.Equal(t, 1, ee.ExitCode(), e.String())
	assert.Contains(t, e.String(), "exit status 2")
}
