package docs_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/output/explainpage"
)

// sidecarPageCommand begins docs/reference/commands.md's command that asks
// the sidecar for explain's page.
const sidecarPageCommand = "(printf '{\"history\": '"

// checkExplainPage checks that page is explain's page for
// docs/reference/commands.md's example (after-compaction.json): one HTML document with its
// Content-Security-Policy, the compaction's window and the refused call
// (its verdict is verdict).
func checkExplainPage(t *testing.T, what, page, verdict string) {
	t.Helper()
	assert.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"), "%s: not an HTML page: %.200s", what, page)
	assert.Contains(t, page, `<meta http-equiv="Content-Security-Policy" content="`+explainpage.CSP+`">`, what)
	assert.Contains(t, page, `id="window-conservative" data-message="5" data-part="0"`, what)
	assert.Contains(t, page, `<tr class="call"><td class="call-id"><a href="#m7p0">c6</a></td><td class="call-tool"><code>issue_refund</code></td><td class="call-verdict v-`+strings.ReplaceAll(verdict, "_", "-")+`">`+verdict+`</td>`, what)
}

// checkPageCommand runs docs/reference/commands.md's explain --format
// html command, writing the page where the page redirects it but in a
// temporary directory, and checks the page.
func checkPageCommand(t *testing.T, bin, line string) {
	t.Helper()
	cmd, file, ok := strings.Cut(line, " > ")
	require.True(t, ok, line)
	// The installed binary, as for the docs' other commands.
	cmd = "policycheck " + strings.TrimPrefix(cmd, "go run ./cmd/policycheck ")
	out := filepath.Join(t.TempDir(), filepath.Base(file))
	_, stderr, code := sh(bin, cmd+" > "+out)
	require.Equal(t, 0, code, "%s\n%s", line, stderr)
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	checkExplainPage(t, line, string(page), "not_available_yet")
}

// checkSidecarPage runs docs/reference/commands.md's request for
// explain's page against the sidecar at base (the page's address replaced
// by base), with curl as the page does. The docs' sidecar serves
// examples/policies,
// whose groups rule hides every tool from a request without a group: the
// refused call is an unknown tool there.
func checkSidecarPage(t *testing.T, base string) {
	t.Helper()
	var line string
	for _, c := range shellCommands(t, "reference/commands.md") {
		if strings.HasPrefix(c, sidecarPageCommand) {
			line = c
		}
	}
	require.NotEmpty(t, line, "docs/reference/commands.md lost its request for explain's page from the sidecar")
	require.Contains(t, line, "http://127.0.0.1:8181/v1/explain", "the page's request is not to the docs' sidecar")
	require.Contains(t, line, "-H 'Accept: text/html'", "the page's request does not ask for HTML")
	if _, err := exec.LookPath("curl"); err != nil {
		// No curl: the same request, from Go.
		hist, err := os.ReadFile("../examples/histories/after-compaction.json")
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, base+"/v1/explain", strings.NewReader(`{"history": `+string(hist)+`}`))
		require.NoError(t, err)
		req.Header.Set("Accept", "text/html")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
		checkExplainPage(t, line, string(page), "unknown_tool")
		return
	}
	cmd, file, ok := strings.Cut(line, " > ")
	require.True(t, ok, line)
	cmd = strings.Replace(cmd, "http://127.0.0.1:8181", base, 1)
	out := filepath.Join(t.TempDir(), filepath.Base(file))
	_, stderr, code := sh(t.TempDir(), cmd+" > "+out)
	require.Equal(t, 0, code, "%s\n%s", line, stderr)
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	checkExplainPage(t, line, string(page), "unknown_tool")
}
