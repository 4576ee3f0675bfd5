package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// rawInit sends an initialize with no Mcp-Session-Id as token, and
// nothing after it: an MCP session that only initializes. It returns the
// status, the new Mcp-Session-Id and the body.
func rawInit(t *testing.T, url, token string) (int, string, string) {
	t.Helper()
	return rawPost(t, url, token, "", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
}

// rawPing pings MCP session sid as token: its status (200 while the
// session lives, 404 after it ended).
func rawPing(t *testing.T, url, token, sid string) int {
	t.Helper()
	code, _, _ := rawPost(t, url, token, sid, `{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	return code
}

// rawPost posts body to /mcp as token, in MCP session sid when not
// empty: its status, the Mcp-Session-Id it answered and its body.
func rawPost(t *testing.T, url, token, sid, body string) (int, string, string) {
	t.Helper()
	h := map[string]string{}
	if sid != "" {
		h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = sid, "2025-11-25"
	}
	return rawPostHeaders(t, url, token, body, h)
}

// TestMCPSessionCap: MCP sessions that only initialize are bounded like
// gateway sessions. A principal's initialize past
// --max-sessions-per-principal closes that principal's least recently
// used idle MCP session (the count stays at the cap; the closed one
// answers 404), never another principal's; past --max-sessions a
// principal with no session of its own to drop is refused (503, a
// JSON-RPC error naming the cap) and nobody's session is closed; a
// DELETE gives the place back; with the table full, a principal below
// its own cap gives up its own idle MCP session.
func TestMCPSessionCap(t *testing.T) {
	const perPrincipal = 2
	_, srv, _ := httpGatewayWith(t, func(c *gateway.Config) {
		c.MaxSessions = 2 * perPrincipal
		c.MaxSessionsPerPrincipal = perPrincipal
	})
	bob := httpClient(t, srv.URL, bobToken, "2025-11-25")
	if _, isErr := call(t, bob, "search_tools", map[string]any{"queries": []string{"write"}}); isErr {
		t.Fatal("bob's search refused")
	}
	var alice []string
	for i := range 6 {
		code, sid, body := rawInit(t, srv.URL, aliceToken)
		if code != http.StatusOK || sid == "" {
			t.Fatalf("alice's initialize %d: %d %s", i, code, body)
		}
		alice = append(alice, sid)
		if got := metric(t, srv.URL, "policycheck_gateway_mcp_sessions"); got > perPrincipal+1 {
			t.Fatalf("after alice's initialize %d the gateway holds %d MCP sessions, want at most alice's %d and bob's", i, got, perPrincipal)
		}
		if msg, isErr := call(t, bob, "files/write_file", map[string]any{"i": i}); isErr {
			t.Fatalf("after alice's initialize %d bob's revealed tool: %q", i, msg)
		}
	}
	// Her last two live; the others were closed, each the least
	// recently used when a new one came.
	for i, sid := range alice {
		if code, live := rawPing(t, srv.URL, aliceToken, sid), i >= len(alice)-perPrincipal; live != (code == http.StatusOK) {
			t.Fatalf("alice's MCP session %d: ping %d, want live %v", i, code, live)
		}
	}
	if got := metric(t, srv.URL, "policycheck_gateway_sessions_evicted_total"); got != len(alice)-perPrincipal {
		t.Fatalf("sessions_evicted_total %d, want %d", got, len(alice)-perPrincipal)
	}

	// The table full (bob 2, alice 2): ops has no session of its own to
	// drop, and is refused without closing anyone's.
	if code, _, body := rawInit(t, srv.URL, bobToken); code != http.StatusOK {
		t.Fatalf("bob's second initialize: %d %s", code, body)
	}
	code, sid, body := rawInit(t, srv.URL, operatorToken)
	var rpc struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if code != http.StatusServiceUnavailable || sid != "" || json.Unmarshal([]byte(body), &rpc) != nil ||
		rpc.ID != float64(7) || !strings.Contains(rpc.Error.Message, "as many MCP sessions as it may") {
		t.Fatalf("ops' initialize with the table full: %d %q %s", code, sid, body)
	}
	for i, sid := range alice[len(alice)-perPrincipal:] {
		if code := rawPing(t, srv.URL, aliceToken, sid); code != http.StatusOK {
			t.Fatalf("alice's live session %d after ops was refused: %d", i, code)
		}
	}
	if msg, isErr := call(t, bob, "files/write_file", map[string]any{}); isErr {
		t.Fatalf("bob's revealed tool after ops was refused: %q", msg)
	}
	if got := metric(t, srv.URL, "policycheck_gateway_sessions_refused_total"); got != 1 {
		t.Fatalf("sessions_refused_total %d", got)
	}
	// Alice's DELETE gives her place back at once.
	if code := deleteSession(t, srv.URL, aliceToken, alice[len(alice)-1], "2025-11-25"); code != http.StatusNoContent {
		t.Fatalf("alice's DELETE: %d", code)
	}
	if got := metric(t, srv.URL, "policycheck_gateway_mcp_sessions"); got != 2*perPrincipal-1 {
		t.Fatalf("after a DELETE %d MCP sessions, want %d", got, 2*perPrincipal-1)
	}
	code, opsFirst, body := rawInit(t, srv.URL, operatorToken)
	if code != http.StatusOK || opsFirst == "" {
		t.Fatalf("ops' initialize after alice's DELETE: %d %s", code, body)
	}
	// The table full again, ops below its own cap: its next initialize
	// gives up its own idle MCP session, nobody else's.
	code, opsSecond, body := rawInit(t, srv.URL, operatorToken)
	if code != http.StatusOK || opsSecond == "" {
		t.Fatalf("ops' second initialize with the table full: %d %s", code, body)
	}
	if rawPing(t, srv.URL, operatorToken, opsFirst) != http.StatusNotFound || rawPing(t, srv.URL, operatorToken, opsSecond) != http.StatusOK ||
		rawPing(t, srv.URL, aliceToken, alice[len(alice)-2]) != http.StatusOK {
		t.Fatal("with the table full ops' initialize closed another MCP session than its own")
	}
	if msg, isErr := call(t, bob, "files/write_file", map[string]any{}); isErr {
		t.Fatalf("bob's revealed tool after ops' second initialize: %q", msg)
	}
	if got := metric(t, srv.URL, "policycheck_gateway_mcp_sessions"); got != 2*perPrincipal {
		t.Fatalf("%d MCP sessions, want %d", got, 2*perPrincipal)
	}
}

// TestMCPSessionCapAllBusy: when every MCP session of the principal is
// in a request, its initialize is refused (429, a JSON-RPC error the
// client sees) and the request in progress finishes; when one is free
// again, the next initialize takes its place.
func TestMCPSessionCapAllBusy(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	started := make(chan struct{}, 1)
	f := newFakeUpstream()
	f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	g := newTestGateway(t, f, func(c *gateway.Config) {
		c.Principals = gateway.NewPrincipals(map[string]gateway.Principal{aliceToken: {Name: "alice"}, bobToken: {Name: "bob"}})
		c.MaxSessionsPerPrincipal = 1
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	busy := httpClient(t, srv.URL, aliceToken, "2025-11-25")
	t.Cleanup(unblock) // before busy's close, which waits for its call
	done := make(chan bool)
	go func() {
		res, err := busy.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/a"}})
		done <- err == nil && !res.IsError
	}()
	<-started
	// The Go SDK's client reports the status (429 is transient to it:
	// it may try again later); the body is a JSON-RPC error with the
	// initialize's id saying why.
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: gatewaytest.Bearer{Token: aliceToken}}, MaxRetries: -1}
	if cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}); err == nil ||
		!strings.Contains(err.Error(), "Too Many Requests") {
		if cs != nil {
			_ = cs.Close()
		}
		t.Fatalf("an initialize while the principal's only MCP session is in a call: %v", err)
	}
	if code, sid, body := rawInit(t, srv.URL, aliceToken); code != http.StatusTooManyRequests || sid != "" || !strings.Contains(body, `"id":7`) ||
		!strings.Contains(body, "every one of them is in a request") {
		t.Fatalf("a raw initialize while busy: %d %s", code, body)
	}
	// Bob is not alice: his initialize is served.
	if code, _, body := rawInit(t, srv.URL, bobToken); code != http.StatusOK {
		t.Fatalf("bob's initialize: %d %s", code, body)
	}
	unblock()
	if !<-done {
		t.Fatal("the call in progress failed")
	}
	if got := metric(t, srv.URL, "policycheck_gateway_sessions_refused_total"); got != 2 {
		t.Fatalf("sessions_refused_total %d", got)
	}
	// Idle once its request has ended (a moment after the client got
	// the answer): the next initialize closes it and is served.
	until(t, "an initialize served", func() bool {
		code, _, _ := rawInit(t, srv.URL, aliceToken)
		return code == http.StatusOK
	})
	if _, err := busy.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/b"}}); err == nil {
		t.Fatal("the session the new one replaced still answers")
	}
	again := httpClient(t, srv.URL, aliceToken, "2025-11-25")
	if msg, isErr := call(t, again, "read_file", map[string]any{"path": "/a"}); isErr {
		t.Fatalf("alice's new session: %q", msg)
	}
}

// TestMCPSessionIdleEndReleases: an MCP session the SDK closes after
// --session-ttl without a request gives its place back.
func TestMCPSessionIdleEndReleases(t *testing.T) {
	_, srv, _ := httpGatewayWith(t, func(c *gateway.Config) {
		c.SessionTTL = time.Second
		c.MaxSessionsPerPrincipal = 2
	})
	for range 2 {
		if code, _, body := rawInit(t, srv.URL, aliceToken); code != http.StatusOK {
			t.Fatalf("initialize: %d %s", code, body)
		}
	}
	if got := metric(t, srv.URL, "policycheck_gateway_mcp_sessions"); got != 2 {
		t.Fatalf("%d MCP sessions, want 2", got)
	}
	until(t, "the idle MCP sessions released", func() bool { return metric(t, srv.URL, "policycheck_gateway_mcp_sessions") == 0 })
}

// TestStatelessHoldsNoMCPSession: a 2026-07-28 request creates no MCP
// session that outlives it, so the caps do not count it and nothing of
// it stays: many requests of one principal whose cap is 1 are all
// served, leave no MCP session held, and hold the one gateway session
// of the principal.
func TestStatelessHoldsNoMCPSession(t *testing.T) {
	g, srv, _ := httpGatewayWith(t, func(c *gateway.Config) { c.MaxSessionsPerPrincipal = 1 })
	for i := range 40 {
		cs := httpClient(t, srv.URL, aliceToken, "2026-07-28")
		if msg, isErr := call(t, cs, "read_file", map[string]any{"path": fmt.Sprint(i)}); isErr {
			t.Fatalf("stateless call %d: %q", i, msg)
		}
		_ = cs.Close()
	}
	if got := metric(t, srv.URL, "policycheck_gateway_mcp_sessions"); got != 0 {
		t.Fatalf("%d MCP sessions held after stateless requests", got)
	}
	if got := len(g.SessionIDs()); got != 1 {
		t.Fatalf("%d gateway sessions, want the principal's one", got)
	}
	if got := metric(t, srv.URL, "policycheck_gateway_sessions_refused_total"); got != 0 {
		t.Fatalf("sessions_refused_total %d", got)
	}
}

// TestStoppedSessionEndsAfterTTL: a stopped session ends --session-ttl
// after it stopped however often its client calls meanwhile (a refused
// call does not renew it); the principal's next request then starts a
// fresh session. Its clients have no other way out: a stdio client, a
// 2026-07-28 client without a _meta handle (its session is its
// principal), and a replica that learnt of the stop from the store.
func TestStoppedSessionEndsAfterTTL(t *testing.T) {
	const ttl = time.Second
	short := func(c *gateway.Config) { c.SessionTTL = ttl }
	// replicas are two gateways on st: a client of alice on each, the
	// second's session begun before the first stops it.
	replicas := func(t *testing.T, st sessionstore.Store) (*mcp.ClientSession, *mcp.ClientSession) {
		shared := func(c *gateway.Config) { short(c); gateway.UseStore(c, st) }
		a, b := newTestGateway(t, newFakeUpstream(), shared), newTestGateway(t, newFakeUpstream(), shared)
		alice := gateway.Principal{Name: "alice"}
		cb := connect(t, b, alice, nil)
		if _, isErr := call(t, cb, "read_file", map[string]any{"path": "/a"}); isErr {
			t.Fatal("b's first call refused")
		}
		return connect(t, a, alice, nil), cb
	}
	for _, tc := range []struct {
		name string
		// open returns the client that stops the session, and the
		// client whose calls after the stop are checked (the same or
		// another replica's).
		open func(t *testing.T) (stop, after *mcp.ClientSession)
	}{
		{"stdio", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession) {
			cs := connect(t, newTestGateway(t, newFakeUpstream(), short), gateway.Principal{Name: "stdio"}, nil)
			return cs, cs
		}},
		{"2026-07-28 without a handle", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession) {
			_, srv, _ := httpGatewayWith(t, short)
			cs := httpClient(t, srv.URL, aliceToken, "2026-07-28")
			return cs, cs
		}},
		{"another replica", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession) {
			return replicas(t, sessionstore.NewMemory(sessionstore.Options{TTL: ttl}))
		}},
		{"another replica, redis", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession) {
			return replicas(t, redisStore(t, redistest.Start(t, false), sessionstore.Options{TTL: ttl}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, after := tc.open(t)
			for range 3 {
				call(t, stop, "issue_refund", map[string]any{})
			}
			if msg, isErr := call(t, after, "read_file", map[string]any{"path": "/a"}); !isErr || !strings.HasPrefix(msg, abortPrefix) {
				t.Fatalf("just after the stop: %q", msg)
			}
			// Called every 20ms, far within the TTL: refused until the
			// TTL after the stop, then served by a fresh session.
			refused := refusedUntilServed(t, after, func(msg string) bool { return strings.HasPrefix(msg, abortPrefix) })
			if refused == 0 {
				t.Fatal("no call was refused after the stop")
			}
			// The replica that stopped it joins the fresh session
			// (neither stopped nor lost).
			if msg, isErr := call(t, stop, "read_file", map[string]any{"path": "/b"}); isErr {
				t.Fatalf("the stopping client once the fresh session began: %q", msg)
			}
			// Fresh: its listing is not empty and its budget is whole
			// (one more refusal of the tool that stopped it is not an
			// abort).
			if got := toolNames(t, after); len(got) == 0 {
				t.Fatal("the fresh session lists nothing")
			}
			if msg, _ := call(t, after, "issue_refund", map[string]any{}); strings.HasPrefix(msg, abortPrefix) {
				t.Fatalf("the fresh session's first refusal: %q", msg)
			}
		})
	}
}

// refusedUntilServed calls read_file on cs every 20ms until a call is
// served, and returns how many were refused before; a refusal whose
// message is not one refusal says fails the test.
func refusedUntilServed(t *testing.T, cs *mcp.ClientSession, refusal func(msg string) bool) int {
	t.Helper()
	refused := 0
	until(t, "a fresh session", func() bool {
		time.Sleep(20 * time.Millisecond)
		msg, isErr := call(t, cs, "read_file", map[string]any{"path": "/a"})
		if isErr {
			if !refusal(msg) {
				t.Fatalf("a refused call: %q", msg)
			}
			refused++
		}
		return !isErr
	})
	return refused
}
