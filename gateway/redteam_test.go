package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/gateway"
)

// Fail-opens of the gateway found by attacking it (the red-team pass of
// the labels and the gateway). Each test fails on main and is skipped
// until the fix its comment describes is applied to gateway/session.go
// and gateway/history.go (other work is under way there).

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
	cfg := gateway.Config{
		Registry:      mustRegistry(t, redteamRegistry),
		EngineOptions: []engine.Option{engine.PolicyPaths("../examples/policies/integrity")},
		Upstreams:     []gateway.Upstream{f.upstreamSpec("bank")},
		StartTimeout:  10 * time.Second,
	}
	if extra != nil {
		extra(&cfg)
	}
	g, err := gateway.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestRedteamTheModelSeesWhatTheHistoryHolds: a result with both
// structuredContent and content reaches the client whole, but the
// session's history (what the flows and labels are found in) keeps only
// the structured content (resultContent reads a result as pydantic-ai
// does). An MCP client that shows its model the content (most do; the
// spec's content is the model's) lets the model copy the secret line of
// the statement into a public review: no flow is found, and the review
// is posted. Seen failing on main (c30cdcd): post_review executed.
//
// Fix (gateway/session.go, forward): hand the client what the history
// records and nothing else — when res.StructuredContent is set, answer
// Content: [one TextContent holding resultContent's JSON] (the MCP spec's
// own fallback) instead of res.Content; or record both in the return
// (resultContent: {"structured": ..., "content": [...]} when both are
// set, as a list of the text items plus the structured JSON). Either way
// what the model can see is what the flows search.
func TestRedteamTheModelSeesWhatTheHistoryHolds(t *testing.T) {
	t.Skip("known fail-open, see report")
	f := redteamUpstream("no such file")
	g := redteamGateway(t, f, nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	seen, isErr := call(t, cs, "get_statement", map[string]any{})
	if isErr || !strings.Contains(seen, "PAYROLL-8841-2026") {
		t.Fatalf("the client should see the statement's text: %q", seen)
	}
	out, isErr := call(t, cs, "post_review", map[string]any{"text": "statement: 2026-02-28 salary ACME Corp +5200 ref PAYROLL-8841-2026"})
	if !isErr || f.calls.Load() != 0 {
		t.Fatalf("a secret the model was shown went into a public review: %q (upstream ran it %d times)", out, f.calls.Load())
	}
}

// TestRedteamAnErrorResultIsBounded: an upstream's error result skips
// MaxResultBytes and MaxDepth, which a success result is held to: its
// whole text goes to the client and into the session's history as a
// retry prompt. Seen failing on main (c30cdcd): 1 MiB through a 1 KiB
// bound, in the history too.
//
// Fix (gateway/session.go, forward, the res.IsError branch): measure
// resultText(res) (and the Content handed back) against MaxResultBytes
// before recording it, as the success branch does; past it, record and
// answer g.failed(..., "The tool X failed: its result is larger than N
// bytes.") instead of the text.
func TestRedteamAnErrorResultIsBounded(t *testing.T) {
	t.Skip("known fail-open, see report")
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
}
