package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTestTopLevelDirectoriesLoadTogether (issue 48, item 8): test's help
// says that the top-level directories it finds without PATH load
// together, and they do: a test in one imports a package of another, and
// the same rule in two of them conflicts.
func TestTestTopLevelDirectoriesLoadTogether(t *testing.T) {
	res := run(t, "", "test", "--help")
	require.Equal(t, 0, res.code, res.stderr)
	help := strings.Join(strings.Fields(res.stdout), " ")
	assert.Contains(t, help, "These directories load together, as opa test loads its paths: one set of policies and one data tree, "+
		"so a test in one sees the packages and data of the others, and a rule defined in two of them is one rule (two values of a complete rule conflict)")

	dir := t.TempDir()
	for name, text := range map[string]string{
		"limits/limits.rego":        "package mine.limits\n\nmax_refund := 100\n",
		"checks/limits_test.rego":   "package mine.checks_test\n\nimport data.mine.limits\n\ntest_max if limits.max_refund == 100\n",
		"checks/conflict.rego":      "package mine.limits\n\nmax_refund := 200\n",
		"unrelated/unrelated.rego":  "package mine.unrelated\n\nx := 1\n",
		"unrelated/testdata/t.rego": "package broken {\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	}
	t.Chdir(dir)
	res = run(t, "", "test")
	require.Equal(t, 1, res.code, "one rule in two directories conflicts\nstdout %s\nstderr %s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "rule data.mine.limits.max_refund produced conflicting values")

	require.NoError(t, os.Remove(filepath.Join("checks", "conflict.rego")))
	res = run(t, "", "test", "-v")
	require.Equal(t, 0, res.code, "stdout %s\nstderr %s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "test_max")
}
