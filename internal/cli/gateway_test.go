package cli_test

import (
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestGatewayBadUsage: what policycheck gateway refuses before it starts
// anything (exit 2).
func TestGatewayBadUsage(t *testing.T) {
	dir := t.TempDir()
	reg := writeFile(t, dir, "tools.yaml", "tools:\n  - name: read_file\n    upstream: files\n")
	orphan := writeFile(t, dir, "orphan.yaml", "tools:\n  - name: read_file\n    upstream: nowhere\n")
	badName := writeFile(t, dir, "bad.yaml", "tools:\n  - name: read_file\n    upstream: 'no spaces'\n")
	tokens := writeFile(t, dir, "tokens.json", `{"tokens": [{"token": "short", "principal": "a"}]}`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no registry", []string{"gateway", "--upstream", "files=true"}, "--registry is required"},
		{"no upstream", []string{"gateway", "--registry", reg}, "at least one --upstream"},
		{"bad upstream", []string{"gateway", "--registry", reg, "--upstream", "files"}, "want NAME=COMMAND or NAME=URL"},
		{"stdio and tokens", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--stdio", "--token-file", tokens}, "--token-file needs HTTP"},
		{"stdio and addr", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--stdio", "--addr", "127.0.0.1:1"}, "exclude each other"},
		{"short token", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--token-file", tokens}, "/tokens/0/token: a token must be at least 16 bytes"},
		{"undefined upstream", []string{"gateway", "--registry", orphan, "--upstream", "files=true", "--start-timeout", "1ms"}, `names upstream "nowhere"`},
		{"upstream pattern", []string{"gateway", "--registry", badName, "--upstream", "files=true"}, "/tools/0/upstream"},
		{"bad import", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--import", "files"}, "want NAME=CAPABILITY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, "", tc.args...)
			if res.code != cli.ExitBadUsage || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", res.code, res.stderr, tc.want)
			}
		})
	}
}
