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
	okConfig := filepath.Join(dir, "labels.yaml")
	require.NoError(t, os.WriteFile(okConfig, []byte("labels:\n  team: tools\n"), 0o600))
	tests := []struct {
		note string
		args []string
	}{
		// A flag that would change nothing, or be read as another value.
		{note: "a mask that is not a JSON pointer", args: []string{"--config", okConfig, "--mask-context", "user/email"}},
		{note: "a mask with a bad escape", args: []string{"--config", okConfig, "--mask-context", "/a~2b"}},
		{note: "a mask without decision logs", args: []string{"--mask-context", "/user"}},
		{note: "no time for a decision", args: []string{"--timeout", "0s"}},
		{note: "negative timeout", args: []string{"--timeout", "-1s"}},
		{note: "negative body timeout", args: []string{"--body-timeout", "-1s"}},
		{note: "negative run ttl", args: []string{"--run-ttl", "-1m"}},
		{note: "negative shutdown grace", args: []string{"--shutdown-grace", "-1s"}},
		{note: "no shadow queue", args: []string{"--shadow-queue", "0"}},
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

// TestServeRefusesConfigOptionsItWouldIgnore: an OPA configuration option
// OPA does not know (a misspelt "decision_log" would leave decision
// logging off without a word), nested ones included, or one policycheck
// serve does not act on, stops serve with exit status 2, the file and the
// option named, before it listens.
func TestServeRefusesConfigOptionsItWouldIgnore(t *testing.T) {
	dir := t.TempDir()
	for note, tc := range map[string]struct{ config, want string }{
		"misspelt top-level option": {"services:\n  s:\n    url: http://127.0.0.1:1\ndecision_log:\n  service: s\n", `unknown configuration option "decision_log"`},
		"misspelt nested option":    {"services:\n  s:\n    url: http://127.0.0.1:1\ndecision_logs:\n  service: s\n  reportin: {}\n", `"decision_logs.reportin"`},
		"misspelt bundle option":    {"services:\n  s:\n    url: http://127.0.0.1:1\nbundles:\n  b:\n    service: s\n    resurce: b.tar.gz\n", `"bundles.b.resurce"`},
		"an option serve ignores":   {"caching:\n  inter_query_builtin_cache:\n    max_size_bytes: 1000\n", `configuration option "caching" is not read by policycheck serve`},
		"OPA's server options":      {"server:\n  encoding: {}\n", `"server" is not read`},
	} {
		t.Run(note, func(t *testing.T) {
			path := filepath.Join(dir, "opa.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o600))
			var stdout, stderr bytes.Buffer
			code := cli.Run([]string{"serve", "--addr", "127.0.0.1:0", "--config", path, "--registry", filepath.Join("..", "examples", "registry.yaml")}, nil, &stdout, &stderr)
			require.Equal(t, cli.ExitBadUsage, code, stderr.String())
			require.Contains(t, stderr.String(), "--config "+path+": ")
			require.Contains(t, stderr.String(), tc.want)
		})
	}
}
