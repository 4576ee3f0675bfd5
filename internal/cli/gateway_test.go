package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/loader"
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
		{"no sessions", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--max-sessions", "0"}, "--max-sessions 0: want 1 or more"},
		{"negative per principal", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--max-sessions-per-principal", "-1"}, "--max-sessions-per-principal -1: want 1 to --max-sessions (10000)"},
		{"per principal past the table", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--max-sessions", "10", "--max-sessions-per-principal", "11"}, "--max-sessions-per-principal 11: want 1 to --max-sessions (10)"},
		{"unknown forward", []string{"gateway", "--registry", reg, "--upstream", "files=true", "--forward", "resources,sampling"}, `"sampling" is not resources, prompts, completions or none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, "", tc.args...)
			if res.code != cli.ExitBadUsage || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", res.code, res.stderr, tc.want)
			}
		})
	}
}

// TestGatewayHistoryDownstream: a gateway session's history, as GET
// /v1/sessions/{id}/history returns it, runs through explain --format
// html, facts and replay unchanged (issue 45 item 6).
func TestGatewayHistoryDownstream(t *testing.T) {
	dir := t.TempDir()
	const regYAML = "tools:\n  - name: read_file\n    upstream: files\n  - name: write_file\n    upstream: files\n    defer_loading: true\n    description: Write a file\n"
	regPath := writeFile(t, dir, "tools.yaml", regYAML)
	reg, err := loader.ParseRegistry(regPath, []byte(regYAML))
	if err != nil {
		t.Fatal(err)
	}
	up := mcp.NewServer(&mcp.Implementation{Name: "files"}, nil)
	for _, n := range []string{"read_file", "write_file"} {
		up.AddTool(&mcp.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	}
	ctx := context.Background()
	g, err := gateway.New(ctx, gateway.Config{Registry: reg, Upstreams: []gateway.Upstream{{Name: "files", Transport: func() (mcp.Transport, error) {
		c, s := mcp.NewInMemoryTransports()
		_, err := up.Connect(ctx, s, nil)
		return c, err
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, st, gateway.Principal{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []mcp.CallToolParams{
		{Name: "read_file", Arguments: map[string]any{}},
		{Name: "write_file", Arguments: map[string]any{}},
		{Name: "search_tools", Arguments: map[string]any{"queries": []string{"write"}}},
		{Name: "write_file", Arguments: map[string]any{"path": "a"}},
	} {
		if _, err := cs.CallTool(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	h, ok := g.History(g.SessionIDs()[0])
	if !ok {
		t.Fatal("no history")
	}
	hist := writeFile(t, dir, "session.json", string(h))
	res := run(t, "", "facts", "--registry", regPath, "--history", hist)
	if res.code != cli.ExitOK || !strings.Contains(res.stdout, `"write_file"`) {
		t.Fatalf("facts: %d %s %s", res.code, res.stdout, res.stderr)
	}
	res = run(t, "", "explain", "--registry", regPath, "--history", hist, "--format", "html")
	if res.code != cli.ExitOK || !strings.Contains(res.stdout, "<html") {
		t.Fatalf("explain: %d %s", res.code, res.stderr)
	}
	base := writeFile(t, dir, "base.rego", "package policycheck.rules.base\n\ndeny contains {\"reason\": \"x\", \"message\": \"no\"} if input.call.tool == \"nothing\"\n")
	cand := writeFile(t, dir, "cand.rego", "package policycheck.rules.cand\n\ndeny contains {\"reason\": \"x\", \"message\": \"no\"} if input.call.tool == \"write_file\"\n")
	res = run(t, "", "replay", "--registry", regPath, "--baseline", base, "--candidate", cand, hist)
	if res.code != cli.ExitOK || !strings.Contains(res.stdout, "execute -> denied") {
		t.Fatalf("replay: %d %s %s", res.code, res.stdout, res.stderr)
	}
}
