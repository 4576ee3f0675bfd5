package cli_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/policies"
)

// shippedFiles is every file the binary embeds, by slash path.
func shippedFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, fs.WalkDir(policies.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(policies.FS(), p)
		out[p] = b
		return err
	}))
	require.NotEmpty(t, out)
	return out
}

// TestPoliciesExport: policies export DIR writes the shipped policies,
// tests included, byte for byte; again into the same DIR it succeeds;
// a DIR holding a different file is refused (exit 2, naming the file)
// and left as it was, unless --force, which writes the shipped files
// and keeps the operator's own.
func TestPoliciesExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shipped")
	res := run(t, "", "policies", "export", dir)
	require.Equal(t, 0, res.code, res.stderr)
	want := shippedFiles(t)
	assert.Contains(t, res.stdout, "wrote")
	for p, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		require.NoError(t, err, p)
		assert.Equal(t, string(b), string(got), p)
	}
	assert.Contains(t, want, "lib/gate.rego")

	res = run(t, "", "policies", "export", dir)
	require.Equal(t, 0, res.code, "the same files again: %s", res.stderr)

	gate := filepath.Join(dir, "lib", "gate.rego")
	require.NoError(t, os.WriteFile(gate, []byte("package policycheck.lib.gate\n# edited\n"), 0o600))
	mine := writeFile(t, dir, "mine_test.rego", "package mine_test\n")
	res = run(t, "", "policies", "export", dir)
	require.Equal(t, 2, res.code, "stdout %s\nstderr %s", res.stdout, res.stderr)
	assert.Contains(t, res.stderr, filepath.Join("lib", "gate.rego"))
	assert.Contains(t, res.stderr, "mine_test.rego")
	assert.Contains(t, res.stderr, "--force")
	b, err := os.ReadFile(gate)
	require.NoError(t, err)
	assert.Contains(t, string(b), "# edited", "a refused export writes nothing")

	res = run(t, "", "policies", "export", "--force", dir)
	require.Equal(t, 0, res.code, res.stderr)
	b, err = os.ReadFile(gate)
	require.NoError(t, err)
	assert.Equal(t, string(want["lib/gate.rego"]), string(b))
	_, err = os.Stat(mine)
	assert.NoError(t, err, "--force keeps files the binary does not ship")
}

// TestPoliciesExportBadInput: each misuse exits 2 and says what is wrong.
func TestPoliciesExportBadInput(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "a-file", "x")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"policies"}, "export"},
		{"no DIR", []string{"policies", "export"}, "want one DIR"},
		{"two DIRs", []string{"policies", "export", dir, dir}, "want one DIR"},
		{"DIR is a file", []string{"policies", "export", file}, "not a directory"},
		{"DIR inside a file", []string{"policies", "export", filepath.Join(file, "sub")}, "a-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, "", tc.args...)
			require.Equal(t, 2, res.code, "stdout %s\nstderr %s", res.stdout, res.stderr)
			assert.Contains(t, res.stderr, tc.want)
		})
	}
}
