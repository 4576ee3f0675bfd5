package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
	"github.com/policycheck/policycheck/loader"
)

// testRegistry maps five upstream tools: gatewaytest.Registry's and
// transfer_funds, which denyTransfers denies; the upstream also lists
// delete_everything, which the registry lacks (hidden).
const testRegistry = gatewaytest.Registry + `  - name: transfer_funds
    upstream: files
`

const denyTransfers = `package policycheck.rules.gwtest

deny contains {"reason": "transfers are off", "message": "Transfers are not allowed."} if input.call.tool == "transfer_funds"
`

// fakeUpstream is an in-process MCP server with the tools the registry
// maps and one it does not; calls counts the calls it ran.
type fakeUpstream struct {
	calls atomic.Int64
	srv   *mcp.Server
}

func newFakeUpstream() *fakeUpstream {
	f := &fakeUpstream{}
	obj := `{"type":"object"}`
	f.srv = gatewaytest.NewUpstream(func() { f.calls.Add(1) },
		&mcp.Tool{Name: "read_file", Description: "Read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		&mcp.Tool{Name: "write_file", Description: "Write a file", InputSchema: json.RawMessage(obj)},
		&mcp.Tool{Name: "issue_refund", Description: "Refund an order", InputSchema: json.RawMessage(obj)},
		&mcp.Tool{Name: "transfer_funds", Description: "Move money", InputSchema: json.RawMessage(obj)},
		&mcp.Tool{Name: "deploy", Description: "Deploy", InputSchema: json.RawMessage(obj)},
		&mcp.Tool{Name: "delete_everything", Description: "Delete every file", InputSchema: json.RawMessage(obj)})
	return f
}

// upstreamSpec serves f to the gateway over in-memory transports.
func (f *fakeUpstream) upstreamSpec(name string) gateway.Upstream {
	return gateway.Upstream{Name: name, Transport: func() (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := f.srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}}
}

func newTestGateway(t testing.TB, f *fakeUpstream, extra func(*gateway.Config)) *gateway.Gateway {
	t.Helper()
	reg, err := loader.ParseRegistry("registry.yaml", []byte(testRegistry))
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{
		Registry:      reg,
		EngineOptions: []engine.Option{engine.Modules(engine.Source{File: "gwtest.rego", Text: denyTransfers})},
		Upstreams:     []gateway.Upstream{f.upstreamSpec("files")},
		StartTimeout:  10 * time.Second,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, nil)),
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

// connect is a Go SDK client of g as principal p.
func connect(t testing.TB, g *gateway.Gateway, p gateway.Principal, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectVersion(t, g, p, "", opts)
}

// connectVersion is connect asking for a protocol version ("" for the
// SDK's latest).
func connectVersion(t testing.TB, g *gateway.Gateway, p gateway.Principal, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Connect(context.Background(), st, p); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, opts)
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	if version != "" && cs.InitializeResult().ProtocolVersion != version {
		t.Fatalf("negotiated %s, want %s", cs.InitializeResult().ProtocolVersion, version)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func call(t testing.TB, cs *mcp.ClientSession, name string, args any) (text string, isError bool) {
	t.Helper()
	text, isError, err := gatewaytest.Call(cs, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return text, isError
}

func TestScriptedSession(t *testing.T) {
	f := newFakeUpstream()
	g := newTestGateway(t, f, nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)

	// The list: what the policy advertises, and the meta-tools; hidden
	// and deferred tools absent.
	got := toolNames(t, cs)
	want := []string{"deploy", "load_capability", "read_file", "search_tools", "transfer_funds"}
	if !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v", got, want)
	}

	// A hidden tool: refused as unknown, never forwarded, and no message
	// names a tool the session cannot see.
	msg, isErr := call(t, cs, "delete_everything", map[string]any{})
	if !isErr || !strings.Contains(msg, "Unknown tool name") {
		t.Fatalf("hidden tool: %q, isError %v", msg, isErr)
	}
	for _, hidden := range []string{"files/write_file", "issue_refund"} {
		if strings.Contains(msg, hidden) {
			t.Errorf("the refusal names %s: %q", hidden, msg)
		}
	}
	// The deferred tool before a search: not available yet.
	if _, isErr := call(t, cs, "files/write_file", map[string]any{}); !isErr {
		t.Fatal("write_file executed before any search revealed it")
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("the upstream ran %d calls, want 0", n)
	}

	// A search reveals it; it executes by name at once.
	msg, isErr = call(t, cs, "search_tools", map[string]any{"queries": []string{"write a file"}})
	if isErr || !strings.Contains(msg, `"discovered_tools":[{"name":"files/write_file"}]`) {
		t.Fatalf("search: %q, isError %v", msg, isErr)
	}
	msg, isErr = call(t, cs, "files/write_file", map[string]any{"path": "x"})
	if isErr || !strings.HasPrefix(msg, "write_file ran with") {
		t.Fatalf("revealed tool: %q, isError %v", msg, isErr)
	}
	if got := toolNames(t, cs); !slices.Contains(got, "files/write_file") {
		t.Errorf("after the reveal, tools/list = %v", got)
	}

	// A denied call.
	msg, isErr = call(t, cs, "transfer_funds", map[string]any{})
	if !isErr || msg != "Transfers are not allowed." {
		t.Fatalf("denied call: %q, isError %v", msg, isErr)
	}
	// invalid_args with the schema's problems (the upstream's inputSchema).
	msg, isErr = call(t, cs, "read_file", map[string]any{"path": 5})
	if !isErr || !strings.Contains(msg, "/path") {
		t.Fatalf("invalid args: %q, isError %v", msg, isErr)
	}
	// A load reveals the capability's tools.
	msg, isErr = call(t, cs, "load_capability", map[string]any{"id": "refunds"})
	if isErr || !strings.Contains(msg, "Follow the refund policy.") {
		t.Fatalf("load: %q, isError %v", msg, isErr)
	}
	if _, isErr := call(t, cs, "issue_refund", map[string]any{}); isErr {
		t.Fatal("issue_refund refused after its capability was loaded")
	}
	// Approval without elicitation: refused, with the digest.
	msg, isErr = call(t, cs, "deploy", map[string]any{})
	if !isErr || !strings.Contains(msg, "sha256:") {
		t.Fatalf("approval: %q, isError %v", msg, isErr)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("the upstream ran %d calls, want 2", n)
	}

	// The history the gateway wrote derives the same facts.
	h := onlyHistory(t, g)
	hist, err := loader.DecodeHistory("history", h, loader.DefaultLimits())
	if err != nil {
		t.Fatalf("the history does not decode: %v\n%s", err, h)
	}
	if err := loader.ValidateHistoryBytes("history", h); err != nil {
		t.Fatalf("the history breaks the history schema: %v", err)
	}
	d, err := g.Engine().Decide(context.Background(), engine.Request{History: hist})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.Facts.Discovered, "files/write_file") || !slices.Equal(d.Facts.Loaded, []string{"refunds"}) {
		t.Errorf("facts of the written history: discovered %v, loaded %v", d.Facts.Discovered, d.Facts.Loaded)
	}
}

// onlyHistory is the history of the gateway's one session.
func onlyHistory(t testing.TB, g *gateway.Gateway) []byte {
	t.Helper()
	ids := g.SessionIDs()
	if len(ids) != 1 {
		t.Fatalf("sessions: %v", ids)
	}
	h, ok := g.History(ids[0])
	if !ok {
		t.Fatal("no history")
	}
	return h
}

func TestSecondPrincipalSeesNothing(t *testing.T) {
	f := newFakeUpstream()
	g := newTestGateway(t, f, nil)
	alice := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	bob := connect(t, g, gateway.Principal{Name: "bob"}, nil)
	call(t, alice, "search_tools", map[string]any{"queries": []string{"write"}})
	if _, isErr := call(t, alice, "files/write_file", map[string]any{}); isErr {
		t.Fatal("alice's revealed tool refused")
	}
	if got := toolNames(t, bob); slices.Contains(got, "files/write_file") {
		t.Fatalf("bob sees alice's reveal: %v", got)
	}
	if _, isErr := call(t, bob, "files/write_file", map[string]any{}); !isErr {
		t.Fatal("bob called a tool only alice revealed")
	}
}

// TestApprovalByElicitation: on 2025-11-25 the gateway sends
// elicitation/create during the call; on 2026-07-28 it answers an
// input-required result that the SDK client fulfils and retries.
func TestApprovalByElicitation(t *testing.T) {
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) { testApprovalByElicitation(t, v) })
	}
}

func testApprovalByElicitation(t *testing.T, version string) {
	f := newFakeUpstream()
	g := newTestGateway(t, f, nil)
	var asked atomic.Int64
	answer := "accept"
	cs := connectVersion(t, g, gateway.Principal{Name: "alice"}, version, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			if !strings.Contains(req.Params.Message, "deploy") || !strings.Contains(req.Params.Message, "sha256:") {
				t.Errorf("the elicitation does not show the call: %q", req.Params.Message)
			}
			return &mcp.ElicitResult{Action: answer}, nil
		},
	})
	if msg, isErr := call(t, cs, "deploy", map[string]any{"env": "prod"}); isErr {
		t.Fatalf("accepted deploy refused: %q", msg)
	}
	// The accept was for that one call: the next asks again.
	answer = "decline"
	if _, isErr := call(t, cs, "deploy", map[string]any{"env": "prod"}); !isErr {
		t.Fatal("a declined deploy executed")
	}
	if asked.Load() != 2 || f.calls.Load() != 1 {
		t.Fatalf("asked %d times, ran %d calls; want 2 and 1", asked.Load(), f.calls.Load())
	}
}

func TestConcurrentSessions(t *testing.T) {
	f := newFakeUpstream()
	g := newTestGateway(t, f, nil)
	done := make(chan error)
	for i := range 4 {
		go func() {
			cs := connect(t, g, gateway.Principal{Name: fmt.Sprintf("p%d", i)}, nil)
			for range 10 {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a"}})
				if err != nil || res.IsError {
					done <- fmt.Errorf("call: %v %v", err, res)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func mustRegistry(t testing.TB, y string) *facts.Registry {
	t.Helper()
	reg, err := loader.ParseRegistry("registry.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
