package mcpinterop_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/conformance"
)

// depsScript runs scripts/mcp-deps.sh into dest with npm's registry
// unreachable (a closed loopback port, an empty npm cache, no retries)
// and CI set to ci ("" unsets it).
func depsScript(t *testing.T, dest, ci string) (stderr string, code int) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(conformance.ModuleRoot(), "scripts", "mcp-deps.sh"))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(strings.ToLower(kv), "npm_config_") {
			env = append(env, kv)
		}
	}
	env = append(env, "POLICYCHECK_MCP_DEPS="+dest, "npm_config_registry=http://127.0.0.1:9/",
		"npm_config_cache="+t.TempDir(), "npm_config_fetch_retries=0", "npm_config_offline=false")
	if ci != "" {
		env = append(env, "CI="+ci)
	}
	cmd.Env = env
	var e bytes.Buffer
	cmd.Stderr = &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return e.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return e.String(), 0
}

// TestDepsScriptSkipsWhatItCannotFetch: scripts/mcp-deps.sh follows
// scripts/fetch.sh's rule. When the npm registry cannot be reached,
// outside CI it says what it skips and why and exits 0 (the tests then
// skip, as Deps says); under CI=true it exits 1. Either way it leaves no
// "installed" mark, so no test takes a half-installed directory for the
// lock's packages.
func TestDepsScriptSkipsWhatItCannotFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed")
	}
	dest := filepath.Join(t.TempDir(), "mcp")
	stderr, code := depsScript(t, dest, "")
	assert.Equal(t, 0, code, "%s", stderr)
	assert.Contains(t, stderr, "note: skipping the MCP interoperability packages")
	assert.Contains(t, stderr, "127.0.0.1:9", "the note says why")
	assert.NoFileExists(t, filepath.Join(dest, "installed"))

	stderr, code = depsScript(t, dest, "true")
	assert.Equal(t, 1, code, "%s", stderr)
	assert.Contains(t, stderr, "CI=true but the MCP interoperability packages")
	assert.NoFileExists(t, filepath.Join(dest, "installed"))
}
