package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTestingExport: docs/testing.md's commands for stock OPA outside
// this repository. In an empty directory, the export it shows writes the
// shipped policies, and its opa test line (the exported directory beside
// the operator's) passes with the doc's sample test under OPA's test
// runner without the policies policycheck test builds in (--no-defaults),
// as stock opa test runs it; without the exported directory that test
// cannot even compile.
func TestTestingExport(t *testing.T) {
	doc, err := os.ReadFile("testing.md")
	require.NoError(t, err)
	var export, opaTest []string
	cmds := shellCommands(t, "testing.md")
	for i, c := range cmds {
		if strings.HasPrefix(c, "policycheck policies export ") && i+1 < len(cmds) {
			export = strings.Fields(strings.TrimPrefix(c, "policycheck "))
			opaTest = strings.Fields(strings.TrimPrefix(cmds[i+1], "opa test "))
			break
		}
	}
	require.NotNil(t, export, "testing.md shows no policycheck policies export")
	require.Equal(t, []string{opaTest[0], "my-policies/"}, opaTest, "testing.md's next command: opa test, the export beside my-policies/")
	sample := fencedAfter(t, string(doc), "say `my-policies/vault_test.rego`", "rego")

	t.Chdir(t.TempDir())
	stdout, stderr, code := run(t, export...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "wrote")
	require.Equal(t, filepath.Clean(export[len(export)-1]), filepath.Clean(opaTest[0]), "opa test runs the exported directory")
	for _, f := range []string{"availability/availability.rego", "lib/gate.rego", "lib/lib.rego", "lib/lib_test.rego"} {
		_, err := os.Stat(filepath.Join(opaTest[0], f))
		assert.NoError(t, err, "the export holds %s", f)
	}
	require.NoError(t, os.MkdirAll("my-policies", 0o755))
	require.NoError(t, os.WriteFile(filepath.Join("my-policies", "vault_test.rego"), []byte(sample), 0o600))

	stdout, stderr, code = run(t, append([]string{"test", "--no-defaults", "--timeout", "2m", "-v"}, opaTest...)...)
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "test_keep_own_drops_the_vaults_other_tools")
	assert.Contains(t, stdout, "data.policycheck.lib_test", "the shipped tests ran too")

	stdout, stderr, code = run(t, "test", "--no-defaults", "my-policies/")
	assert.NotEqual(t, 0, code, "without the export the sample needs the shipped library\n%s\n%s", stdout, stderr)
}
