package docs_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// fencedAfter returns the body of the first ```lang block after heading
// in doc.
func fencedAfter(t *testing.T, doc, heading, lang string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, heading)
	require.True(t, ok, "no %q", heading)
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	require.True(t, ok, "no ```%s block after %q", lang, heading)
	body, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	return body
}

// TestFailClosedOneCallExample: docs/fail-closed.md's rule and the call
// it shows are what eval answers for {"repo": 42} next to a call that
// executes (issue 43, item 11).
func TestFailClosedOneCallExample(t *testing.T) {
	raw, err := os.ReadFile("fail-closed.md")
	require.NoError(t, err)
	doc := string(raw)
	const heading = "### An error in the rules about one call fails that call closed"
	rule := fencedAfter(t, doc, heading, "rego")
	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(fencedAfter(t, doc, heading, "json")), &want))

	dir := t.TempDir()
	files := map[string]string{
		"pol/repos.rego": "package policycheck.rules.repos\n\n" + rule,
		"registry.yaml":  "tools:\n  - name: delete_repo\n  - name: get_time\n",
		"h.json": `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "clean up"}]},
 {"kind": "response", "parts": [
  {"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": "c1", "args": {"repo": 42}},
  {"part_kind": "tool-call", "tool_name": "delete_repo", "tool_call_id": "c2", "args": {"repo": "sandbox-1"}}]}]`,
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	t.Chdir(dir)
	var out, errb bytes.Buffer
	code := cli.Run([]string{"eval", "--registry", "registry.yaml", "--history", "h.json", "--policy", "pol"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, errb.String())
	var d struct {
		Errors []string
		Calls  []map[string]any
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &d))
	assert.Empty(t, d.Errors)
	require.Len(t, d.Calls, 2)
	got := map[string]any{}
	for k := range want {
		got[k] = d.Calls[0][k]
	}
	assert.Equal(t, want, got, "the call docs/fail-closed.md shows")
	assert.Equal(t, "execute", d.Calls[1]["verdict"])
}
