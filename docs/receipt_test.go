package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestTrustReceiptRejection runs the receipt examples docs/trust.md
// shows failing (```console exit=1 blocks, which TestTrustExamples, for
// commands that succeed, leaves alone): each exits 1 and prints what
// the page shows.
func TestTrustReceiptRejection(t *testing.T) {
	blocks := codeBlocks(t, "trust.md", "console exit=1")
	require.NotEmpty(t, blocks, "docs/trust.md lost its rejected receipt")
	t.Chdir("..")
	for _, b := range blocks {
		first, want, _ := strings.Cut(b, "\n")
		c, ok := strings.CutPrefix(first, "$ policycheck ")
		require.True(t, ok, "a console exit=1 block runs policycheck: %q", first)
		args, err := splitArgs(c)
		require.NoError(t, err, c)
		stdout, stderr, code := run(t, args...)
		require.Equal(t, cli.ExitFailed, code, "%s\n%s%s", c, stdout, stderr)
		assert.Equal(t, want, stdout+stderr, "docs/trust.md shows the output of\n%s", c)
	}
}

// TestTrustReceiptGo: the Go verification docs/trust.md shows is the
// trust package's example (ExampleVerify, run with its output checked
// by go test ./trust), word for word.
func TestTrustReceiptGo(t *testing.T) {
	blocks := codeBlocks(t, "trust.md", "go")
	require.NotEmpty(t, blocks)
	example, err := os.ReadFile(filepath.Join("..", "trust", "example_receipt_test.go"))
	require.NoError(t, err)
	found := false
	for _, b := range blocks {
		if strings.Contains(b, "trust.Verify(") {
			found = true
			assert.Contains(t, string(example), b, "docs/trust.md's Go verification is not trust/example_receipt_test.go's")
		}
	}
	require.True(t, found, "docs/trust.md lost its Go verification")
}

// TestTrustReceiptPython runs the Python verification docs/trust.md
// shows on the page's receipt, with the call's arguments and with other
// ones, and compares its output with the page's. It needs the
// cryptography package, which cannot be installed here from PyPI: without
// it the test skips, saying so.
func TestTrustReceiptPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python receipt verification is not run")
	}
	if out, err := exec.Command(py, "-c", "import cryptography").CombinedOutput(); err != nil {
		t.Skipf("the cryptography package cannot be imported (%s): the Python receipt verification is not run", strings.TrimSpace(string(out)))
	}
	// The page's receipt verification, not its verified-evidence harness
	// (which go test ./examples runs).
	var verify []string
	for _, b := range codeBlocks(t, "trust.md", "python") {
		if strings.Contains(b, "def check_receipt(") {
			verify = append(verify, b)
		}
	}
	require.Len(t, verify, 1)
	script := filepath.Join(t.TempDir(), "verify_receipt.py")
	require.NoError(t, os.WriteFile(script, []byte(verify[0]), 0o600))
	doc, err := os.ReadFile("trust.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)Run as `python3 verify_receipt.py KEYS CALL RECEIPT`.*?```text\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, m, "docs/trust.md lost the Python verification's output")
	want := strings.Split(strings.TrimSuffix(string(m[1]), "\n"), "\n")
	require.Len(t, want, 2)
	for i, call := range []string{"receipt-call.json", "receipt-call-other-args.json"} {
		cmd := exec.Command(py, script, "examples/trust/receipt-keys.json", "examples/trust/"+call, "examples/trust/receipt.jws")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if i == 0 {
			require.NoError(t, err, "%s", out)
		} else {
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			require.Equal(t, 1, ee.ExitCode(), "%s", out)
		}
		assert.Equal(t, want[i]+"\n", string(out))
	}
}
