//lint:file-ignore SA1019 the gateway relays logging, sampling and elicitation of protocol versions before 2026-07-28, which deprecates logging and sampling (SEP-2577).

package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
)

// chattyUpstream is the fake upstream whose read_file logs, reports
// progress, elicits and samples during the call, and answers with what
// the elicitation and the sampling brought back (or their errors).
func chattyUpstream() *fakeUpstream {
	f := newFakeUpstream()
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ss := req.Session
			tok := req.Params.GetProgressToken()
			for i := range 3 {
				_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("step %d", i)})
				if tok != nil {
					_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
				}
			}
			out := ""
			if r, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)}); err != nil {
				out += "elicit error; "
			} else {
				out += fmt.Sprintf("elicit %s %v; ", r.Action, r.Content["name"])
			}
			if r, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}); err != nil {
				out += "sample error"
			} else {
				out += "sample " + r.Content.(*mcp.TextContent).Text
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil
		})
	return f
}

// TestRelayDuringCall: what the upstream sends during a forwarded call
// reaches the client that made it: its log messages (at the level the
// client set), its progress (under the client's token), its elicitation
// and sampling requests (the client declared both).
func TestRelayDuringCall(t *testing.T) {
	g := newTestGateway(t, chattyUpstream(), nil)
	var mu sync.Mutex
	var logs []string
	var progress []float64
	cs := connectVersion(t, g, gateway.Principal{Name: "alice"}, "2025-11-25", &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, fmt.Sprint(r.Params.Data))
			mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			if r.Params.ProgressToken == "mine" {
				progress = append(progress, r.Params.Progress)
			}
			mu.Unlock()
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "hello"}}, nil
		},
	})
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a"}, Meta: mcp.Meta{"progressToken": "mine"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "elicit accept ada; sample hello" {
		t.Fatalf("result %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(logs) != "[step 0 step 1 step 2]" || fmt.Sprint(progress) != "[0 1 2]" {
		t.Fatalf("logs %v, progress %v", logs, progress)
	}
}

// TestRelayWithoutCapabilities: a client that declared neither
// elicitation nor sampling is not asked; the upstream gets an error, and
// no log message reaches a client that set no level.
func TestRelayWithoutCapabilities(t *testing.T) {
	g := newTestGateway(t, chattyUpstream(), nil)
	var mu sync.Mutex
	logs := 0
	cs := connectVersion(t, g, gateway.Principal{Name: "alice"}, "2025-11-25", &mcp.ClientOptions{
		LoggingMessageHandler: func(context.Context, *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs++
			mu.Unlock()
		},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "elicit error; sample error" {
		t.Fatalf("result %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if logs != 0 {
		t.Fatalf("%d log messages reached a client that set no level", logs)
	}
}
