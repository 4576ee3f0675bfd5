package gateway_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/trust"
)

// TestReceiptsReachTheUpstream: with a receipt signer, a forwarded call
// carries its execution receipt in _meta, which the upstream verifies
// against the call it runs; the history keeps it in the return's
// metadata.
func TestReceiptsReachTheUpstream(t *testing.T) {
	signer, err := trust.NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeUpstream()
	var mu sync.Mutex
	var verr error
	verified := 0
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			m := req.Params.Meta
			id, _ := m["policycheck/tool_call_id"].(string)
			run, _ := m["policycheck/run"].(string)
			tool, _ := m["policycheck/tool"].(string)
			receipt, _ := m["policycheck/receipt"].(string)
			_, err := trust.Verify(receipt, signer.Keys(), trust.Call{RunID: run, ToolCallID: &id, Tool: tool, Args: req.Params.Arguments})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				verr = err
			} else {
				verified++
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	g := newTestGateway(t, f, func(c *gateway.Config) { c.Receipts = signer })
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "/etc/motd"}); isErr {
		t.Fatal(msg)
	}
	mu.Lock()
	defer mu.Unlock()
	if verr != nil || verified != 1 {
		t.Fatalf("verified %d, err %v", verified, verr)
	}
	if h := onlyHistory(t, g); !strings.Contains(string(h), `"metadata":{"policycheck_receipt":"ey`) {
		t.Fatalf("no receipt in the history:\n%s", h)
	}
}
