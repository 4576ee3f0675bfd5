package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
	"github.com/policycheck/policycheck/loader"
)

// TestMain runs the fake upstream over stdio when the test binary is
// re-executed as an upstream command; else the tests, then closes the
// Redis Cluster they shared, if one started it.
func TestMain(m *testing.M) {
	if os.Getenv("GATEWAY_TEST_UPSTREAM") == "1" {
		f := newFakeUpstream()
		if os.Getenv("GATEWAY_TEST_CRASH_ON_CALL") == "1" {
			f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					os.Exit(3)
					return nil, nil
				})
		}
		_ = f.srv.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	code := m.Run()
	sharedCluster.Close()
	os.Exit(code)
}

const (
	aliceToken    = "alice-token-0123456789"
	bobToken      = "bob-token-0123456789ab"
	operatorToken = "operator-token-0123456789"
)

// httpGateway is a gateway over HTTP with three principals' tokens that
// a browser page of https://app.example may call.
func httpGateway(t *testing.T) (*gateway.Gateway, *httptest.Server, *fakeUpstream) {
	t.Helper()
	return httpGatewayWith(t, func(c *gateway.Config) { c.AllowedOrigins = []string{"https://app.example"} })
}

func httpClient(t *testing.T, url, token, version string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: gatewaytest.Bearer{Token: token}}, MaxRetries: -1}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, nil)
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestProtocolVersions drives the scripted reveal over HTTP on the three
// protocol versions: sessions by Mcp-Session-Id on 2025-06-18 and
// 2025-11-25, stateless requests (one session per principal, or per
// _meta handle) on 2026-07-28.
func TestProtocolVersions(t *testing.T) {
	for _, v := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			g, srv, f := httpGateway(t)
			cs := httpClient(t, srv.URL, aliceToken, v)
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s", got)
			}
			if got := toolNames(t, cs); slices.Contains(got, "files/write_file") || !slices.Contains(got, "search_tools") {
				t.Fatalf("tools/list = %v", got)
			}
			if _, isErr := call(t, cs, "search_tools", map[string]any{"queries": []string{"write"}}); isErr {
				t.Fatal("search refused")
			}
			if msg, isErr := call(t, cs, "files/write_file", map[string]any{}); isErr {
				t.Fatalf("revealed tool refused: %q", msg)
			}
			if f.calls.Load() != 1 {
				t.Fatalf("upstream calls %d", f.calls.Load())
			}
			// Bob on the same version sees none of it.
			bob := httpClient(t, srv.URL, bobToken, v)
			if _, isErr := call(t, bob, "files/write_file", map[string]any{}); !isErr {
				t.Fatal("bob reached alice's reveal")
			}
			if len(g.SessionIDs()) != 2 {
				t.Fatalf("sessions %v", g.SessionIDs())
			}
		})
	}
}

// TestStatelessHandles: on 2026-07-28 a handle in _meta names the
// session, within the principal: another principal sending the same
// handle reaches a session of its own.
func TestStatelessHandles(t *testing.T) {
	_, srv, _ := httpGateway(t)
	alice := httpClient(t, srv.URL, aliceToken, "2026-07-28")
	bob := httpClient(t, srv.URL, bobToken, "2026-07-28")
	callMeta := func(cs *mcp.ClientSession, handle, name string, args any) bool {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{"policycheck/session": handle}})
		if err != nil {
			t.Fatal(err)
		}
		return res.IsError
	}
	callMeta(alice, "h1", "search_tools", map[string]any{"queries": []string{"write"}})
	if callMeta(alice, "h1", "files/write_file", map[string]any{}) {
		t.Fatal("alice's own handle lost the reveal")
	}
	if !callMeta(alice, "h2", "files/write_file", map[string]any{}) {
		t.Fatal("another handle of alice's shares the reveal")
	}
	if !callMeta(bob, "h1", "files/write_file", map[string]any{}) {
		t.Fatal("bob reached alice's session by her handle")
	}
}

func post(t *testing.T, url, token, origin, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

// TestHTTPRefusals: tokens, Origin, batches, depth, size.
func TestHTTPRefusals(t *testing.T) {
	_, srv, _ := httpGateway(t)
	u := srv.URL + "/mcp"
	deep := strings.Repeat(`{"a":`, 300) + "1" + strings.Repeat("}", 300)
	for _, tc := range []struct {
		name, token, origin, body string
		status                    int
	}{
		{"no token", "", "", initBody, 401},
		{"bad token", "nope-nope-nope-nope", "", initBody, 401},
		{"origin not allowed", aliceToken, "https://evil.example", initBody, 403},
		{"origin allowed", aliceToken, "https://app.example", initBody, 200},
		{"batch", aliceToken, "", "[" + initBody + "]", 400},
		{"too deep", aliceToken, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + deep + `}`, 400},
		{"too large", aliceToken, "", `{"x":"` + strings.Repeat("a", 5<<20) + `"}`, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, u, tc.token, tc.origin, tc.body)
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
		})
	}
}

// TestHistoryEndpoint: an operator token reads a session's history, which
// decodes and decides as a pydantic-ai history; other tokens cannot.
func TestHistoryEndpoint(t *testing.T) {
	g, srv, _ := httpGateway(t)
	cs := httpClient(t, srv.URL, aliceToken, "2025-11-25")
	call(t, cs, "search_tools", map[string]any{"queries": []string{"write"}})
	call(t, cs, "files/write_file", map[string]any{"path": "a"})
	ids := g.SessionIDs()
	if len(ids) != 1 {
		t.Fatal(ids)
	}
	get := func(token string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/sessions/"+ids[0]+"/history", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := get(aliceToken); resp.StatusCode != 403 {
		t.Fatalf("alice read the history: %d", resp.StatusCode)
	}
	if resp, _ := get(""); resp.StatusCode != 401 {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	resp, body := get(operatorToken)
	if resp.StatusCode != 200 {
		t.Fatalf("operator: %d %s", resp.StatusCode, body)
	}
	hist, err := loader.DecodeHistory("history", body, loader.DefaultLimits())
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	d, err := g.Engine().Decide(context.Background(), engine.Request{History: hist})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Facts.Discovered, []string{"files/write_file"}) || !slices.Contains(d.Facts.Returned, "files/write_file") {
		t.Fatalf("facts: %+v", d.Facts)
	}
	// /health and /metrics.
	hr, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	var h gateway.Health
	if err := json.NewDecoder(hr.Body).Decode(&h); err != nil || h.Status != "ok" || h.Upstreams[0].State != gateway.StateUp {
		t.Fatalf("health %+v %v", h, err)
	}
	mr, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	mb, _ := io.ReadAll(mr.Body)
	if !bytes.Contains(mb, []byte(`policycheck_gateway_calls_total{verdict="execute"} 2`)) {
		t.Fatalf("metrics:\n%s", mb)
	}
}

// stdioUpstream is this test binary re-executed as a stdio upstream.
func stdioUpstream(t *testing.T, env string) gateway.Upstream {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return gateway.Upstream{Name: "files", Command: fmt.Sprintf("env GATEWAY_TEST_UPSTREAM=1 %s %s -test.run=^$", env, exe)}
}

// TestStdioUpstreamCrash: a stdio upstream that dies during a call fails
// that call closed with a message, is restarted with backoff, and serves
// the next call.
func TestStdioUpstreamCrash(t *testing.T) {
	f := newFakeUpstream()
	g := newTestGateway(t, f, func(c *gateway.Config) {
		c.Upstreams = []gateway.Upstream{stdioUpstream(t, "GATEWAY_TEST_CRASH_ON_CALL=1")}
	})
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if got := toolNames(t, cs); !slices.Contains(got, "read_file") {
		t.Fatalf("tools/list = %v", got)
	}
	msg, isErr := call(t, cs, "read_file", map[string]any{"path": "a"})
	if !isErr || !strings.Contains(msg, "failed") {
		t.Fatalf("crashing call: %q, isError %v", msg, isErr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := g.Health()
		if h.Upstreams[0].State == gateway.StateUp && h.Upstreams[0].Restarts > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not restarted: %+v", h)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The write tool does not crash: the restarted upstream runs it.
	call(t, cs, "search_tools", map[string]any{"queries": []string{"write"}})
	if msg, isErr := call(t, cs, "files/write_file", map[string]any{}); isErr {
		t.Fatalf("after the restart: %q", msg)
	}
}

// TestElicitationOverHTTP: approval by elicitation on the three protocol
// versions over streamable HTTP (2026-07-28 through an input-required
// result and a stateless retry).
func TestElicitationOverHTTP(t *testing.T) {
	for _, v := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			_, srv, f := httpGateway(t)
			tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: gatewaytest.Bearer{Token: aliceToken}}, MaxRetries: -1}
			c := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			})
			cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if msg, isErr := call(t, cs, "deploy", map[string]any{"env": "prod"}); isErr {
				t.Fatalf("accepted deploy: %q", msg)
			}
			if f.calls.Load() != 1 {
				t.Fatalf("upstream calls %d", f.calls.Load())
			}
		})
	}
}

// TestSessionIDOfAnotherPrincipal: bob presenting alice's Mcp-Session-Id
// is refused and never reaches her session.
func TestSessionIDOfAnotherPrincipal(t *testing.T) {
	_, srv, f := httpGateway(t)
	alice := httpClient(t, srv.URL, aliceToken, "2025-11-25")
	call(t, alice, "search_tools", map[string]any{"queries": []string{"write"}})
	sid := alice.ID()
	if sid == "" {
		t.Fatal("no session id")
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files/write_file","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bobToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if f.calls.Load() != 0 {
		t.Fatal("bob's call ran")
	}
}
