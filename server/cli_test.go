package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestServeUsageErrors: policycheck serve refuses bad flags and inputs
// with exit status 2 before it listens.
func TestServeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	badPolicy := filepath.Join(dir, "bad.rego")
	require.NoError(t, os.WriteFile(badPolicy, []byte("package x\n\nallow if {"), 0o600))
	badConfig := filepath.Join(dir, "opa.yaml")
	require.NoError(t, os.WriteFile(badConfig, []byte("bundles: [1, 2]\n"), 0o600))
	tests := []struct {
		note string
		args []string
	}{
		{note: "unknown flag", args: []string{"--nope"}},
		{note: "missing registry file", args: []string{"--registry", filepath.Join(dir, "missing.yaml")}},
		{note: "tls cert without key", args: []string{"--tls-cert", empty}},
		{note: "empty token file", args: []string{"--token-file", empty}},
		{note: "policy that does not parse", args: []string{"--policy", badPolicy}},
		{note: "bad OPA config", args: []string{"--config", badConfig}},
		{note: "address in use or invalid", args: []string{"--addr", "256.0.0.1:1"}},
		{note: "negative prefix cache", args: []string{"--prefix-cache-bytes", "-1"}},
		{note: "negative run table", args: []string{"--runs", "-5"}},
		{note: "negative decision cache", args: []string{"--decision-cache", "-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Run(append([]string{"serve"}, tc.args...), nil, &stdout, &stderr)
			require.Equal(t, cli.ExitBadUsage, code, stderr.String())
			require.Contains(t, stderr.String(), "policycheck:")
		})
	}
}
