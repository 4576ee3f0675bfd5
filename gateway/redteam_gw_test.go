package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
)

// Fail-opens of the gateway found by driving it as a hostile MCP client
// (the red-team pass of the gateway's session store, search and limits),
// each seen failing on main before its fix.

// secretLine is what the statement holds that a public review must not
// carry.
const secretLine = "2026-02-28 salary ACME Corp +5200 ref PAYROLL-8841-2026"

// secretUpstream answers get_statement with the secret line and pad
// bytes of text after it (plain content, no structured result; an error
// result when isErr), and post_review with "ok", counting the reviews it
// posted.
func secretUpstream(pad int, isErr bool) *fakeUpstream {
	f := &fakeUpstream{srv: mcp.NewServer(&mcp.Implementation{Name: "bank"}, nil)}
	obj := json.RawMessage(`{"type":"object"}`)
	f.srv.AddTool(&mcp.Tool{Name: "get_statement", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: isErr, Content: []mcp.Content{&mcp.TextContent{Text: secretLine + "\n" + strings.Repeat("-", pad)}}}, nil
	})
	f.srv.AddTool(&mcp.Tool{Name: "post_review", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	return f
}

// TestRedteamAnUnwrittenResultIsNotShown: a result the session store
// refuses to keep (the answer passes --max-session-bytes, which the call
// before it did not) reached the client whole while the history got, at
// the next call, a "failed, may or may not have run" return in its
// place: the model was shown the secret statement, the flows (found in
// the history) never saw it, and a public review carrying its secret
// line was posted. A client brings this about on its own by filling its
// session near the limit. Now a call whose answer is not in the history
// answers the client with what the history will hold.
func TestRedteamAnUnwrittenResultIsNotShown(t *testing.T) {
	for _, tc := range []struct {
		note  string
		isErr bool
	}{{"a result", false}, {"an error result", true}} {
		t.Run(tc.note, func(t *testing.T) {
			f := secretUpstream(8<<10, tc.isErr)
			g := redteamGateway(t, f, func(c *gateway.Config) { c.MaxSessionBytes = 4 << 10 })
			cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
			seen, _ := call(t, cs, "get_statement", map[string]any{})
			call(t, cs, "read_file", map[string]any{})
			h := string(onlyHistory(t, g))
			if strings.Contains(seen, "PAYROLL-8841-2026") && !strings.Contains(h, "PAYROLL-8841-2026") {
				t.Errorf("the client was shown a result the history does not hold: shown %d bytes, history %s", len(seen), h)
			}
			if !strings.Contains(seen, "start a new session") {
				t.Errorf("the client should be told why its result is withheld: %.200q", seen)
			}
			review, _ := call(t, cs, "post_review", map[string]any{"text": secretLine})
			if f.calls.Load() != 0 {
				t.Errorf("a public review carrying the statement's secret line was posted (%q)", review)
			}
		})
	}
}

// searchRegistry has n search-gated tools on the upstream "files".
func searchRegistry(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("tools:\n  - name: read_file\n    upstream: files\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: files/tool%d\n    defer_loading: true\n    description: does thing number %d for the user\n", i, i)
	}
	return b.String()
}

// historyBytes is what the session's history counts against
// --max-session-bytes: its messages' bytes.
func historyBytes(t *testing.T, g *gateway.Gateway) int {
	t.Helper()
	var msgs []json.RawMessage
	if err := json.Unmarshal(onlyHistory(t, g), &msgs); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	return n
}

// TestRedteamAFullSessionIsNotDerivedAgainPerCall: at
// --max-session-bytes, a call the session store refused (its own
// message, or the answer the gateway writes for it) dropped the replica's
// derived state, and the session's next call derived the whole session
// again from the store, then was refused the same way: every call of a
// full session cost the whole session (a 2 KB call at a 4 MiB session of
// 7,644 small calls: 113 ms, 15,287 messages derived; 24 ms at 1 MiB,
// 7.7 ms at 256 KiB; about 1.8 s at the default 64 MiB), against 0.5 ms
// for a call. Now a call that would not fit is refused before it is
// decided, and a session whose answer the store refused is full: its
// calls are refused before anything is added. The session is derived
// again at most once.
func TestRedteamAFullSessionIsNotDerivedAgainPerCall(t *testing.T) {
	const limit = 64 << 10
	long := strings.Repeat("n", 1000)
	for _, tc := range []struct {
		note string
		// fill brings the session to its limit.
		fill func(t *testing.T, g *gateway.Gateway, cs *mcp.ClientSession)
	}{
		{"calls that do not fit", func(t *testing.T, _ *gateway.Gateway, cs *mcp.ClientSession) {
			for range 10_000 {
				if _, isErr := call(t, cs, "read_file", map[string]any{"path": "a"}); isErr {
					return
				}
			}
			t.Fatal("the session never filled")
		}},
		{"an answer that does not fit, nor the one written for it", func(t *testing.T, g *gateway.Gateway, cs *mcp.ClientSession) {
			// A read whose call and answer leave 2,000 bytes: room for
			// a call of a long unknown name, not for its refusal, nor
			// for the answer the gateway writes for an unanswered call.
			call(t, cs, "read_file", map[string]any{"path": "a", "pad": ""})
			base := historyBytes(t, g)
			pad := (limit - 2*base - 2000) / 2
			call(t, cs, "read_file", map[string]any{"path": "a", "pad": strings.Repeat("x", pad)})
			if room := limit - historyBytes(t, g); room < 1900 || room > 2100 {
				t.Fatalf("room %d, want about 2000", room)
			}
			call(t, cs, long, map[string]any{})
		}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			g := newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) { c.MaxSessionBytes = limit; c.Logger = nil })
			cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
			tc.fill(t, g, cs)
			msgs := gateway.Derived(g)
			before := msgs
			for i := range 20 {
				args := map[string]any{"path": "a"}
				if i%2 == 0 {
					args["pad"] = strings.Repeat("y", 2000)
				}
				if msg, isErr := call(t, cs, "read_file", args); !isErr || !strings.Contains(msg, "the most the gateway keeps") {
					t.Fatalf("call %d at the limit: %.200q", i, msg)
				}
			}
			if derived := gateway.Derived(g) - before; derived > msgs+10 {
				t.Errorf("20 calls at the limit of a session of %d messages derived %d: the session is derived again per call", msgs, derived)
			}
		})
	}
}

// TestRedteamACallThatDoesNotFitLeavesTheSession: a call too large for
// the room its session has left is refused before it is decided; the
// session goes on, not derived again, and a smaller call runs.
func TestRedteamACallThatDoesNotFitLeavesTheSession(t *testing.T) {
	g := newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) { c.MaxSessionBytes = 64 << 10; c.Logger = nil })
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	for range 5 {
		call(t, cs, "read_file", map[string]any{"path": "a"})
	}
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "a", "pad": strings.Repeat("y", 64<<10)}); !isErr || !strings.Contains(msg, "the most the gateway keeps") {
		t.Fatalf("a call past the limit: %.200q", msg)
	}
	before := gateway.Derived(g)
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "a"}); isErr {
		t.Fatalf("a call that fits after one that did not: %.200q", msg)
	}
	if derived := gateway.Derived(g) - before; derived > 2 {
		t.Errorf("the call after one that did not fit derived %d messages: the session was derived again", derived)
	}
}

// TestRedteamSearchArgumentProblemsAreBounded: search_tools listed a
// problem for every extra key of its arguments, so a call of 100,000
// keys (1.1 MB) was answered, and its history written, with a 4.8 MB
// message, allocating 283 MB (a call of another tool with the same
// arguments: a 99-byte answer, 67 MB). Now it lists at most
// facts.MaxArgsProblems, as the engine lists a schema's, and counts the
// rest.
func TestRedteamSearchArgumentProblemsAreBounded(t *testing.T) {
	reg := mustRegistry(t, searchRegistry(t, 10))
	g := newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) { c.Registry = reg; c.EngineOptions = nil; c.Logger = nil })
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	args := map[string]any{"queries": []string{"thing"}}
	for i := range 10_000 {
		args[fmt.Sprintf("k%05d", i)] = 0
	}
	msg, isErr := call(t, cs, "search_tools", args)
	if !isErr || !strings.Contains(msg, "10000 validation errors") || !strings.Contains(msg, "/k00000: additional properties are not allowed") {
		t.Fatalf("the search with extra keys: %.300q", msg)
	}
	if len(msg) > 1<<10 {
		t.Errorf("10,000 extra keys were answered with %d bytes", len(msg))
	}
	if h := historyBytes(t, g); h > 200<<10 {
		t.Errorf("the history holds %d bytes after one call of %d keys", h, len(args))
	}
}
