package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/internal/testkit/syncbuf"
)

// TestDecisionLogCarriesSessionAndPrincipal: one line per call, with the
// session id the history endpoint takes and the principal.
func TestDecisionLogCarriesSessionAndPrincipal(t *testing.T) {
	var log syncbuf.Buffer
	g := newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) { c.DecisionLog = &log })
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	call(t, cs, "read_file", map[string]any{"path": "a"})
	call(t, cs, "transfer_funds", map[string]any{})
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), log.String())
	}
	var e struct {
		Session, Principal, Tool, Verdict string
		Decision                          struct {
			Calls []struct{ Verdict string } `json:"calls"`
		}
	}
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Session != g.SessionIDs()[0] || e.Principal != "alice" || e.Tool != "transfer_funds" || e.Verdict != "denied" ||
		len(e.Decision.Calls) != 1 || e.Decision.Calls[0].Verdict != "denied" {
		t.Fatalf("entry %+v", e)
	}
}

// TestListChangedAfterReveal: a client that listens is told after a
// search reveals something and after a load.
func TestListChangedAfterReveal(t *testing.T) {
	g := newTestGateway(t, newFakeUpstream(), nil)
	changed := make(chan struct{}, 4)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	toolNames(t, cs)
	call(t, cs, "search_tools", map[string]any{"queries": []string{"write"}})
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/tools/list_changed after a reveal")
	}
	if got := toolNames(t, cs); !slices.Contains(got, "files/write_file") || slices.Contains(got, "policycheck_list_changed") {
		t.Fatalf("tools/list = %v", got)
	}
}

// TestUpstreamListChangeNeverWidens: a tool the upstream starts listing
// later is refused as unknown; one it stops listing is refused with a
// message and left out of the list.
func TestUpstreamListChangeNeverWidens(t *testing.T) {
	f := newFakeUpstream()
	g := newTestGateway(t, f, nil)
	changed := make(chan struct{}, 8)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	toolNames(t, cs)
	f.srv.AddTool(&mcp.Tool{Name: "exfiltrate", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t.Error("the gateway forwarded a tool the registry does not map")
			return &mcp.CallToolResult{}, nil
		})
	f.srv.RemoveTools("read_file")
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the client was not told that the list changed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(toolNames(t, cs), "read_file") {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream's change was not read: %+v", g.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := toolNames(t, cs); slices.Contains(got, "exfiltrate") {
		t.Fatalf("tools/list = %v", got)
	}
	if msg, isErr := call(t, cs, "exfiltrate", map[string]any{}); !isErr || !strings.Contains(msg, "Unknown tool name") {
		t.Fatalf("exfiltrate: %q", msg)
	}
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "a"}); !isErr || !strings.Contains(msg, "does not offer it now") {
		t.Fatalf("read_file: %q", msg)
	}
}

// TestSearchNamesNoHiddenTool: a search matches registry tools only;
// an upstream tool the registry lacks is never named. Each refused call
// is its own session's: two charged refusals of a meta-tool in a row
// exceed its retry budget (1) and stop the session.
func TestSearchNamesNoHiddenTool(t *testing.T) {
	g := newTestGateway(t, newFakeUpstream(), nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	msg, isErr := call(t, cs, "search_tools", map[string]any{"queries": []string{"delete every file"}})
	if isErr || strings.Contains(msg, "delete_everything") {
		t.Fatalf("search: %q", msg)
	}
	n := 0
	fresh := func() *mcp.ClientSession {
		n++
		return connect(t, g, gateway.Principal{Name: fmt.Sprintf("alice-%d", n)}, nil)
	}
	cs = fresh()
	msg, isErr = call(t, cs, "search_tools", map[string]any{"queries": []string{"!!!"}})
	if !isErr || msg != "Please provide at least one non-empty search query." {
		t.Fatalf("empty search: %q", msg)
	}
	cs = fresh()
	msg, isErr = call(t, cs, "search_tools", map[string]any{"queries": []string{"x"}, "limit": 3})
	if !isErr || !strings.Contains(msg, "/limit") {
		t.Fatalf("extra key: %q", msg)
	}
	cs = fresh()
	msg, isErr = call(t, cs, "load_capability", map[string]any{"id": "nope"})
	if !isErr || msg != "No capability found with id 'nope'." {
		t.Fatalf("unknown capability: %q", msg)
	}
	cs = fresh()
	msg, isErr = call(t, cs, "search_tools", map[string]any{"queries": []any{"write", 7}})
	if !isErr || !strings.Contains(msg, "/queries") {
		t.Fatalf("queries not all strings: %q", msg)
	}
	cs = fresh()
	msg, isErr = call(t, cs, "load_capability", map[string]any{"id": 5})
	if !isErr || !strings.Contains(msg, "/id") {
		t.Fatalf("an id that is not a string: %q", msg)
	}
}

// TestImportAndHints: --import brings an upstream's unmapped tools into a
// capability; annotations reach the registry as upstream_hint labels.
func TestImportAndHints(t *testing.T) {
	g := newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) { c.Imports = map[string]string{"files": "refunds"} })
	reg := g.Engine().Registry()
	tl, ok := reg.Tool("delete_everything")
	if !ok || tl.Capability != "refunds" {
		t.Fatalf("delete_everything not imported into refunds: %+v %v", tl, ok)
	}
	if _, ok := reg.Tool("write_file"); ok {
		t.Fatal("write_file, mapped as files/write_file, was imported again")
	}
	rf, _ := reg.Tool("read_file")
	if !slices.Contains(rf.Labels, "upstream_hint:readOnlyHint=true") {
		t.Fatalf("read_file labels %v", rf.Labels)
	}
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if _, isErr := call(t, cs, "delete_everything", map[string]any{}); !isErr {
		t.Fatal("an imported tool ran before its capability was loaded")
	}
	call(t, cs, "load_capability", map[string]any{"id": "refunds"})
	if msg, isErr := call(t, cs, "delete_everything", map[string]any{}); isErr {
		t.Fatalf("imported tool after the load: %q", msg)
	}
}

func TestRegistryToolWithoutUpstream(t *testing.T) {
	reg := mustRegistry(t, "tools:\n  - name: orphan\n")
	_, err := gateway.New(context.Background(), gateway.Config{Registry: reg, Upstreams: []gateway.Upstream{newFakeUpstream().upstreamSpec("files")}})
	if err == nil || !strings.Contains(err.Error(), `/tools/0: tool "orphan" names no upstream`) {
		t.Fatalf("err = %v", err)
	}
}

// TestSessionHistoryBound: a session past MaxSessionBytes refuses calls.
func TestSessionHistoryBound(t *testing.T) {
	f := newFakeUpstream()
	g := newTestGateway(t, f, func(c *gateway.Config) { c.MaxSessionBytes = 2000 })
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	var msg string
	for range 20 {
		var isErr bool
		if msg, isErr = call(t, cs, "read_file", map[string]any{"path": "a"}); isErr {
			break
		}
	}
	if !strings.Contains(msg, "start a new session") {
		t.Fatalf("last answer %q", msg)
	}
}

// TestUpstreamSchemaThatDoesNotCompile: the tool stays, and every call
// of it is refused with invalid_args, until the registry gives a schema.
func TestUpstreamSchemaThatDoesNotCompile(t *testing.T) {
	f := newFakeUpstream()
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"p":{"$ref":"https://example.com/elsewhere.json"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t.Error("a call with an uncompilable schema was forwarded")
			return &mcp.CallToolResult{}, nil
		})
	g := newTestGateway(t, f, nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if msg, isErr := call(t, cs, "read_file", map[string]any{"p": "x"}); !isErr {
		t.Fatalf("read_file: %q", msg)
	}
	if _, isErr := call(t, cs, "transfer_funds", map[string]any{}); !isErr {
		t.Fatal("the other tools should still be decided as before")
	}
}

// TestLateUpstream: an upstream that lists after StartTimeout joins the
// registry when it does: its schema holds the next call of a session
// that started before.
func TestLateUpstream(t *testing.T) {
	f := newFakeUpstream()
	release := make(chan struct{})
	spec := f.upstreamSpec("files")
	inner := spec.Transport
	spec.Transport = func() (mcp.Transport, error) {
		<-release
		return inner()
	}
	g := newTestGateway(t, f, func(c *gateway.Config) {
		c.Upstreams = []gateway.Upstream{spec}
		c.StartTimeout = 10 * time.Millisecond
	})
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if msg, _ := call(t, cs, "read_file", map[string]any{"path": 5}); !strings.Contains(msg, "not available right now") {
		t.Fatalf("before the upstream is up: %q", msg)
	}
	before := g.Engine()
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for g.Engine() == before {
		if time.Now().After(deadline) {
			t.Fatal("the late listing was not taken")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": 5}); !isErr || !strings.Contains(msg, "/path") {
		t.Fatalf("after: %q", msg)
	}
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "a"}); isErr {
		t.Fatalf("after: %q", msg)
	}
}

// TestUpstreamToolError: an upstream isError result reaches the client as
// it is and the history as a retry prompt (pydantic-ai's MCP client
// raises ModelRetry), not as a successful return.
func TestUpstreamToolError(t *testing.T) {
	f := newFakeUpstream()
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such file"}}}, nil
		})
	g := newTestGateway(t, f, nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "a"}); !isErr || msg != "no such file" {
		t.Fatalf("%q %v", msg, isErr)
	}
	h := string(onlyHistory(t, g))
	if !strings.Contains(h, `{"content":"no such file","tool_name":"read_file","tool_call_id":"gw_1"`) || !strings.Contains(h, `"part_kind":"retry-prompt"`) {
		t.Fatalf("history:\n%s", h)
	}
}

// TestForwardedResultCarriesNoUpstreamMeta: the upstream's _meta (its
// server info) does not reach the client.
func TestForwardedResultCarriesNoUpstreamMeta(t *testing.T) {
	g := newTestGateway(t, newFakeUpstream(), nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a"}})
	if err != nil || res.IsError {
		t.Fatal(err, res)
	}
	if raw, _ := json.Marshal(res); strings.Contains(string(raw), `"files"`) {
		t.Fatalf("the upstream's identity reached the client: %s", raw)
	}
}

// TestAllowAllRegistry: docs/gateway.md's allow-all recipe: an always-on
// capability and --import make every listed tool callable.
func TestAllowAllRegistry(t *testing.T) {
	f := newFakeUpstream()
	g, err := gateway.New(context.Background(), gateway.Config{
		Registry:  mustRegistry(t, "capabilities:\n  - id: everything\n"),
		Upstreams: []gateway.Upstream{f.upstreamSpec("files")},
		Imports:   map[string]string{"files": "everything"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	got := toolNames(t, cs)
	if !slices.Equal(got, []string{"delete_everything", "deploy", "issue_refund", "read_file", "transfer_funds", "write_file"}) {
		t.Fatalf("tools/list = %v", got)
	}
	if msg, isErr := call(t, cs, "delete_everything", map[string]any{}); isErr {
		t.Fatal(msg)
	}
}
