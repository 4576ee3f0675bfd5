package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/gateway"
)

// Fail-opens of the gateway found by attacking it (the red-team pass of
// the labels and the gateway), each seen failing before its fix in
// gateway/session.go's forward.

// redteamRegistry: a secret statement, a public review form, a file
// reader, all on one upstream.
const redteamRegistry = `
tools:
  - name: get_statement
    upstream: bank
    integrity: trusted
    confidentiality: secret
  - name: post_review
    upstream: bank
    consequential: true
    clearance: public
  - name: read_file
    upstream: bank
`

// redteamUpstream answers get_statement with a structured result and a
// text for the model that differ (the MCP spec lets a tool give both),
// read_file with an error whose text is big, and post_review with "ok".
func redteamUpstream(errText string) *fakeUpstream {
	f := &fakeUpstream{srv: mcp.NewServer(&mcp.Implementation{Name: "bank"}, nil)}
	obj := json.RawMessage(`{"type":"object"}`)
	f.srv.AddTool(&mcp.Tool{Name: "get_statement", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			StructuredContent: map[string]any{"lines": 1},
			Content:           []mcp.Content{&mcp.TextContent{Text: "2026-02-28 salary ACME Corp +5200 ref PAYROLL-8841-2026"}},
		}, nil
	})
	f.srv.AddTool(&mcp.Tool{Name: "post_review", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: errText}}}, nil
	})
	return f
}

func redteamGateway(t *testing.T, f *fakeUpstream, extra func(*gateway.Config)) *gateway.Gateway {
	t.Helper()
	return newTestGateway(t, f, func(c *gateway.Config) {
		c.Registry = mustRegistry(t, redteamRegistry)
		c.EngineOptions = []engine.Option{engine.PolicyPaths("../examples/policies/integrity")}
		c.Upstreams = []gateway.Upstream{f.upstreamSpec("bank")}
		c.Logger = nil
		if extra != nil {
			extra(c)
		}
	})
}

// TestRedteamTheModelSeesWhatTheHistoryHolds: a result with both
// structuredContent and content used to reach the client whole while the
// session's history (what the flows and labels are found in) kept only
// the structured content (resultContent reads a result as pydantic-ai
// does): an MCP client that shows its model the content let the model
// copy the statement's secret line into a public review with no flow
// found, and the review was posted (seen on c30cdcd). Now the client is
// answered with what the history records, the structured content as its
// text: the secret line never reaches the model, and what it is shown is
// what the flows search.
func TestRedteamTheModelSeesWhatTheHistoryHolds(t *testing.T) {
	f := redteamUpstream("no such file")
	g := redteamGateway(t, f, nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	seen, isErr := call(t, cs, "get_statement", map[string]any{})
	if isErr || strings.Contains(seen, "PAYROLL-8841-2026") || seen != `{"lines":1}` {
		t.Fatalf("the client should be shown the recorded structured result, not the text beside it: %q", seen)
	}
	if h := string(onlyHistory(t, g)); strings.Contains(h, "PAYROLL-8841-2026") || !strings.Contains(h, `"lines":1`) {
		t.Fatalf("the history should hold the structured result only: %s", h)
	}
}

// TestRedteamAnErrorResultIsBounded: an upstream's error result skipped
// MaxResultBytes, which a success result is held to: its whole text went
// to the client and into the session's history as a retry prompt (seen
// on c30cdcd: 1 MiB through a 1 KiB bound, in the history too). Now its
// text is measured as a success's content is; past the bound the call
// failed, and the client is answered with the recorded text only.
func TestRedteamAnErrorResultIsBounded(t *testing.T) {
	big := strings.Repeat("A", 1<<20)
	f := redteamUpstream(big)
	g := redteamGateway(t, f, func(c *gateway.Config) { c.MaxResultBytes = 1 << 10 })
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	text, _ := call(t, cs, "read_file", map[string]any{})
	if len(text) > 1<<10 {
		t.Errorf("the client got %d bytes of an error result through a %d-byte bound", len(text), 1<<10)
	}
	if h := onlyHistory(t, g); len(h) > 1<<16 {
		t.Errorf("the history holds %d bytes after an error result past the bound", len(h))
	}
	if !strings.Contains(text, "larger than 1024 bytes") {
		t.Errorf("the client should be told the result was too large: %q", text)
	}
}
