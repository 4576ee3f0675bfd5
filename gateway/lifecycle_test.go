package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
	"github.com/policycheck/policycheck/internal/testkit/syncbuf"
)

// httpGatewayWith is httpGateway with extra configuration.
func httpGatewayWith(t *testing.T, extra func(*gateway.Config)) (*gateway.Gateway, *httptest.Server, *fakeUpstream) {
	t.Helper()
	f := newFakeUpstream()
	g := newTestGateway(t, f, func(c *gateway.Config) {
		c.Principals = gateway.NewPrincipals(map[string]gateway.Principal{
			aliceToken:    {Name: "alice"},
			bobToken:      {Name: "bob"},
			operatorToken: {Name: "ops", Operator: true},
		})
		if extra != nil {
			extra(c)
		}
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return g, srv, f
}

// metric is a counter's value on /metrics.
func metric(t *testing.T, url, name string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /metrics:\n%s", name, b)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// historyStatus is GET /v1/sessions/{id}/history's status for the
// operator.
func historyStatus(t *testing.T, url, id string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/sessions/"+id+"/history", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// callMeta is call with a session handle in _meta.
func callMeta(t *testing.T, cs *mcp.ClientSession, handle, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{"policycheck/session": handle}})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return gatewaytest.Text(res), res.IsError
}

// TestPrincipalSessionCap: a principal opening more sessions than
// --max-sessions-per-principal drops its own least recently used ones,
// never another principal's: bob's revealed tool stays callable however
// many sessions alice opens, on stateful MCP sessions (the evicted one's
// MCP session is closed: its next request fails) and on _meta handles
// (the evicted handle starts an empty session: its reveal is gone).
func TestPrincipalSessionCap(t *testing.T) {
	const perPrincipal, more = 3, 4
	g, srv, f := httpGatewayWith(t, func(c *gateway.Config) {
		c.MaxSessions = perPrincipal + 2
		c.MaxSessionsPerPrincipal = perPrincipal
	})
	bob := httpClient(t, srv.URL, bobToken, "2025-11-25")
	if _, isErr := call(t, bob, "search_tools", map[string]any{"queries": []string{"write"}}); isErr {
		t.Fatal("bob's search refused")
	}
	var alice []*mcp.ClientSession
	for i := range perPrincipal + more {
		// The caps see a request end (its session no longer busy, its
		// lastUsed stamped) when its handler returns, a moment after
		// the client read the answer: the order of use the test means
		// is the one the caps see once every request before ended.
		until(t, "the requests before answered", func() bool { return gateway.MCPRequests(g) == 0 })
		cs := httpClient(t, srv.URL, aliceToken, "2025-11-25")
		if _, isErr := call(t, cs, "read_file", map[string]any{"path": "/a"}); isErr {
			t.Fatalf("alice's session %d refused", i)
		}
		alice = append(alice, cs)
		// Session 0 is used after each new one: never the least
		// recently used, it is never dropped.
		if _, isErr := call(t, alice[0], "read_file", map[string]any{"path": "/a"}); isErr {
			t.Fatal("alice's session 0 refused")
		}
		if msg, isErr := call(t, bob, "files/write_file", map[string]any{"i": i}); isErr {
			t.Fatalf("after alice's session %d bob's revealed tool: %q", i, msg)
		}
	}
	if got := len(g.SessionIDs()); got != perPrincipal+1 {
		t.Fatalf("%d sessions held, want alice's %d and bob's", got, perPrincipal)
	}
	// Alice's session 0 and her last ones are served; the evicted ones'
	// (1 to 4, each the least recently used when a new one came) MCP
	// sessions are closed.
	for i, cs := range alice {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/b"}})
		if live := i == 0 || i > more; live != (err == nil) {
			t.Fatalf("alice's session %d: err %v, want live %v", i, err, live)
		}
	}
	if got := metric(t, srv.URL, "policycheck_gateway_sessions_evicted_total"); got != more {
		t.Fatalf("sessions_evicted_total %d, want %d", got, more)
	}
	if f.calls.Load() == 0 {
		t.Fatal("no call ran")
	}

	// Handles: the evicted handle's reveal is gone (closed), bob's stays.
	h := httpClient(t, srv.URL, aliceToken, "2026-07-28")
	callMeta(t, h, "h0", "search_tools", map[string]any{"queries": []string{"write"}})
	if msg, isErr := callMeta(t, h, "h0", "files/write_file", map[string]any{}); isErr {
		t.Fatalf("h0's revealed tool: %q", msg)
	}
	for i := 1; i <= perPrincipal; i++ {
		callMeta(t, h, fmt.Sprintf("h%d", i), "read_file", map[string]any{"path": "/a"})
	}
	if msg, isErr := callMeta(t, h, "h0", "files/write_file", map[string]any{}); !isErr {
		t.Fatalf("an evicted handle kept its reveal: %q", msg)
	}
	if msg, isErr := call(t, bob, "files/write_file", map[string]any{}); isErr {
		t.Fatalf("bob's revealed tool: %q", msg)
	}
}

// TestPrincipalSessionCapAllBusy: when every session of the principal is
// in a call, its new session is refused (nothing is dropped mid-call):
// _meta handles, which no MCP session bounds (2026-07-28: stateless; an
// MCP session's own cap is TestMCPSessionCapAllBusy's).
func TestPrincipalSessionCapAllBusy(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	f := newFakeUpstream()
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	g := newTestGateway(t, f, func(c *gateway.Config) {
		c.Principals = gateway.NewPrincipals(map[string]gateway.Principal{aliceToken: {Name: "alice"}, operatorToken: {Name: "ops", Operator: true}})
		c.MaxSessionsPerPrincipal = 1
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	alice := httpClient(t, srv.URL, aliceToken, "2026-07-28")
	done := make(chan bool)
	go func() {
		res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/a"}, Meta: mcp.Meta{"policycheck/session": "h1"}})
		done <- err == nil && !res.IsError
	}()
	<-started
	if _, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"queries": []string{"write"}},
		Meta: mcp.Meta{"policycheck/session": "h2"}}); err == nil || !strings.Contains(err.Error(), "every one of them is in a call") {
		t.Fatalf("a new session while the principal's only one is in a call: %v", err)
	}
	close(release)
	if !<-done {
		t.Fatal("the call in progress failed")
	}
	if got := metric(t, srv.URL, "policycheck_gateway_sessions_refused_total"); got != 1 {
		t.Fatalf("sessions_refused_total %d", got)
	}
}

// deleteSession sends DELETE /mcp for Mcp-Session-Id sid with token.
func deleteSession(t *testing.T, url, token, sid, version string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// until waits up to 5s for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeleteEndsTheSession: a client's DELETE of its Mcp-Session-Id
// drops the gateway's session (its history is no longer served: 404; in
// the store too); another principal's DELETE of it is refused 403 and
// drops nothing.
func TestDeleteEndsTheSession(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		for _, v := range []string{"2025-06-18", "2025-11-25"} {
			t.Run(store+"/"+v, func(t *testing.T) {
				var st sessionstore.Store = sessionstore.NewMemory(sessionstore.Options{})
				if store == "redis" {
					st = redisStore(t, redistest.Start(t, false), sessionstore.Options{})
				}
				g, srv, _ := httpGatewayWith(t, func(c *gateway.Config) { gateway.UseStore(c, st) })
				alice := httpClient(t, srv.URL, aliceToken, v)
				call(t, alice, "search_tools", map[string]any{"queries": []string{"write"}})
				ids := g.SessionIDs()
				if len(ids) != 1 || historyStatus(t, srv.URL, ids[0]) != 200 {
					t.Fatalf("sessions %v", ids)
				}
				// Bob cannot end alice's session.
				if code := deleteSession(t, srv.URL, bobToken, alice.ID(), v); code != http.StatusForbidden {
					t.Fatalf("bob's DELETE of alice's session: %d", code)
				}
				if msg, isErr := call(t, alice, "files/write_file", map[string]any{}); isErr {
					t.Fatalf("after bob's DELETE alice's revealed tool: %q", msg)
				}
				if historyStatus(t, srv.URL, ids[0]) != 200 {
					t.Fatal("bob's DELETE dropped alice's history")
				}
				// Alice's DELETE (the SDK's close) ends it before it
				// is answered.
				if err := alice.Close(); err != nil {
					t.Fatal(err)
				}
				if got := g.SessionIDs(); len(got) != 0 {
					t.Fatalf("after the DELETE was answered the gateway holds %v", got)
				}
				if code := historyStatus(t, srv.URL, ids[0]); code != http.StatusNotFound {
					t.Fatalf("the ended session's history: %d, want 404", code)
				}
				if _, ok, err := st.Lookup(context.Background(), ids[0]); ok || err != nil {
					t.Fatalf("the store still holds the ended session (%v)", err)
				}
				if got := metric(t, srv.URL, "policycheck_gateway_sessions_ended_total"); got != 1 {
					t.Fatalf("sessions_ended_total %d", got)
				}
			})
		}
	}
}

// TestDeleteByAnotherPrincipalDropsNothing: bob's DELETE with alice's
// Mcp-Session-Id, raw, while bob has his own session with the same
// gateway: alice's session and bob's both stay.
func TestDeleteByAnotherPrincipalDropsNothing(t *testing.T) {
	g, srv, _ := httpGatewayWith(t, nil)
	alice := httpClient(t, srv.URL, aliceToken, "2025-11-25")
	bob := httpClient(t, srv.URL, bobToken, "2025-11-25")
	call(t, alice, "search_tools", map[string]any{"queries": []string{"write"}})
	call(t, bob, "search_tools", map[string]any{"queries": []string{"write"}})
	if code := deleteSession(t, srv.URL, bobToken, alice.ID(), "2025-11-25"); code != http.StatusForbidden {
		t.Fatalf("bob's DELETE of alice's session: %d", code)
	}
	if code := deleteSession(t, srv.URL, "", alice.ID(), "2025-11-25"); code != http.StatusUnauthorized {
		t.Fatalf("a DELETE without a token: %d", code)
	}
	time.Sleep(50 * time.Millisecond)
	if got := len(g.SessionIDs()); got != 2 {
		t.Fatalf("%d sessions, want 2", got)
	}
	for name, cs := range map[string]*mcp.ClientSession{"alice": alice, "bob": bob} {
		if msg, isErr := call(t, cs, "files/write_file", map[string]any{}); isErr {
			t.Fatalf("%s's revealed tool: %q", name, msg)
		}
	}
	// Bob's own DELETE ends his session only.
	if code := deleteSession(t, srv.URL, bobToken, bob.ID(), "2025-11-25"); code != http.StatusNoContent {
		t.Fatalf("bob's DELETE of his session: %d", code)
	}
	if got := len(g.SessionIDs()); got != 1 {
		t.Fatalf("%d sessions after bob's DELETE, want alice's", got)
	}
	if msg, isErr := call(t, alice, "files/write_file", map[string]any{}); isErr {
		t.Fatalf("alice's revealed tool after bob ended his session: %q", msg)
	}
}

// TestIdleMCPSessionEnds: the SDK closing an MCP session idle for
// --session-ttl ends the gateway's session of it too.
func TestIdleMCPSessionEnds(t *testing.T) {
	g, srv, _ := httpGatewayWith(t, func(c *gateway.Config) { c.SessionTTL = 300 * time.Millisecond })
	alice := httpClient(t, srv.URL, aliceToken, "2025-11-25")
	call(t, alice, "search_tools", map[string]any{"queries": []string{"write"}})
	ids := g.SessionIDs()
	if len(ids) != 1 {
		t.Fatal(ids)
	}
	until(t, "the idle session dropped", func() bool { return len(g.SessionIDs()) == 0 })
	if code := historyStatus(t, srv.URL, ids[0]); code != http.StatusNotFound {
		t.Fatalf("the ended session's history: %d", code)
	}
	if got := metric(t, srv.URL, "policycheck_gateway_sessions_ended_total"); got != 1 {
		t.Fatalf("sessions_ended_total %d", got)
	}
}

const abortPrefix = "Tool 'issue_refund' exceeded max retries count of 1."

// TestRetryBudgetStopsTheSession: a session driven past a tool's retry
// budget is stopped as the reference aborts the run (spec X8): the
// exceeding call and every later one, a valid call too, answer isError
// with the abort message, nothing reaches the upstream, and the decision
// log says why; its listing is empty. Another principal's session and
// alice's next MCP session are unaffected.
func TestRetryBudgetStopsTheSession(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []scriptCall
		abort string
	}{
		// not_available_yet: the first refusal free, the second charged,
		// the third exceeds.
		{"not available", []scriptCall{{"issue_refund", nil}, {"issue_refund", nil}, {"issue_refund", nil}}, abortPrefix},
		// invalid_args: the first charged, the second exceeds.
		{"invalid args", []scriptCall{{"read_file", map[string]any{}}, {"read_file", map[string]any{"path": 7}}}, "Tool 'read_file' exceeded max retries count of 1."},
		// A refused meta-tool call, accounted by the gateway
		// (engine.Run.ReportFailure): load_capability's budget is 1.
		{"meta-tool retry", []scriptCall{{"load_capability", map[string]any{"id": "nope"}}, {"load_capability", map[string]any{"id": "nope"}}}, "Tool 'load_capability' exceeded max retries count of 1."},
		// unknown_tool, a tool the registry hides: the message names
		// only the name the client sent.
		{"unknown tool", []scriptCall{{"delete_everything", nil}, {"delete_everything", nil}}, "Tool 'delete_everything' exceeded max retries count of 1."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &syncbuf.Buffer{}
			_, srv, f := httpGatewayWith(t, func(c *gateway.Config) { c.DecisionLog = log })
			alice := httpClient(t, srv.URL, aliceToken, "2025-11-25")
			var msg string
			var isErr bool
			for i, c := range tc.calls {
				msg, isErr = call(t, alice, c.name, c.args)
				if !isErr {
					t.Fatalf("call %d (%s) ran", i, c.name)
				}
				if last := i == len(tc.calls)-1; last != strings.HasPrefix(msg, tc.abort) {
					t.Fatalf("call %d answered %q (abort expected: %v)", i, msg, last)
				}
			}
			if strings.Contains(msg, "delete_everything") && tc.calls[0].name != "delete_everything" {
				t.Fatalf("the abort names a hidden tool: %q", msg)
			}
			// Stopped: a valid call is refused with the abort message.
			for _, c := range []scriptCall{{"read_file", map[string]any{"path": "/a"}}, {"search_tools", map[string]any{"queries": []string{"write"}}}} {
				if msg, isErr := call(t, alice, c.name, c.args); !isErr || !strings.HasPrefix(msg, tc.abort) || !strings.Contains(msg, "Start a new session") {
					t.Fatalf("%s on the stopped session: %q", c.name, msg)
				}
			}
			if f.calls.Load() != 0 {
				t.Fatalf("the upstream ran %d calls", f.calls.Load())
			}
			if got := toolNames(t, alice); len(got) != 0 {
				t.Fatalf("the stopped session lists %v", got)
			}
			// The decision log: the abort (with the call that exceeded)
			// and each refused call, verdict aborted, the reason.
			var aborted []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
				var e map[string]any
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatal(err)
				}
				if e["verdict"] == "aborted" {
					aborted = append(aborted, e)
				}
			}
			if len(aborted) != 3 || aborted[0]["tool_call_id"] != fmt.Sprintf("gw_%d", len(tc.calls)) || aborted[1]["tool_call_id"] != nil ||
				aborted[1]["tool"] != "read_file" || !strings.HasPrefix(aborted[1]["reason"].(string), tc.abort) || aborted[0]["principal"] != "alice" {
				t.Fatalf("aborted lines: %v\n%s", aborted, log.String())
			}
			// Other sessions go on.
			bob := httpClient(t, srv.URL, bobToken, "2025-11-25")
			if msg, isErr := call(t, bob, "read_file", map[string]any{"path": "/a"}); isErr {
				t.Fatalf("bob: %q", msg)
			}
			again := httpClient(t, srv.URL, aliceToken, "2025-11-25")
			if msg, isErr := call(t, again, "read_file", map[string]any{"path": "/a"}); isErr {
				t.Fatalf("alice's new session: %q", msg)
			}
			if got := metric(t, srv.URL, "policycheck_gateway_sessions_stopped_total"); got != 1 {
				t.Fatalf("sessions_stopped_total %d", got)
			}
			if got := metric(t, srv.URL, "policycheck_gateway_calls_refused_stopped_total"); got != 2 {
				t.Fatalf("calls_refused_stopped_total %d", got)
			}
		})
	}
}

// TestStoppedOnEveryReplica: a session stopped on one replica is stopped
// on the other (the abort travels with the answer's note), and the
// history ends with the abort the client got.
func TestStoppedOnEveryReplica(t *testing.T) {
	st := sessionstore.NewMemory(sessionstore.Options{})
	a, b := newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) { gateway.UseStore(c, st) }),
		newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) { gateway.UseStore(c, st) })
	alice := gateway.Principal{Name: "alice"}
	ca, cb := connect(t, a, alice, nil), connect(t, b, alice, nil)
	if _, isErr := call(t, cb, "read_file", map[string]any{"path": "/a"}); isErr {
		t.Fatal("b's first call refused")
	}
	for range 3 {
		call(t, ca, "issue_refund", map[string]any{})
	}
	if msg, isErr := call(t, cb, "read_file", map[string]any{"path": "/a"}); !isErr || !strings.HasPrefix(msg, abortPrefix) {
		t.Fatalf("the other replica: %q", msg)
	}
	h, _ := b.History(b.SessionIDs()[0])
	if !strings.Contains(string(h), abortPrefix) {
		t.Fatalf("the history does not end with the abort:\n%s", h)
	}
}

// TestUpstreamErrorsStopTheSession: an upstream's isError result is a
// charged failure (pydantic-ai's MCP client raises ModelRetry): the
// first reaches the client as it is, the one past the tool's budget
// answers the abort message instead, and the session is stopped.
func TestUpstreamErrorsStopTheSession(t *testing.T) {
	f := newFakeUpstream()
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.calls.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk on fire"}}}, nil
		})
	g := newTestGateway(t, f, nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "/a"}); !isErr || msg != "disk on fire" {
		t.Fatalf("the first error: %q", msg)
	}
	const abort = "Tool 'read_file' exceeded max retries count of 1."
	if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "/a"}); !isErr || !strings.HasPrefix(msg, abort) {
		t.Fatalf("the error past the budget: %q", msg)
	}
	if msg, isErr := call(t, cs, "search_tools", map[string]any{"queries": []string{"write"}}); !isErr || !strings.HasPrefix(msg, abort) {
		t.Fatalf("after the stop: %q", msg)
	}
	if f.calls.Load() != 2 {
		t.Fatalf("the upstream ran %d calls, want 2", f.calls.Load())
	}
}
