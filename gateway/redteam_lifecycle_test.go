package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// mcpHTTPRequest is a raw MCP request to the gateway at url as the
// bearer of token, in MCP session sid (none: "").
func mcpHTTPRequest(ctx context.Context, method, url, token, sid, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, method, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return req
}

// send sends an MCP request without testing.T (for goroutines): its
// status and Mcp-Session-Id; -1 when it could not be sent.
func send(method, url, token, sid, body string) (int, string) {
	resp, err := http.DefaultClient.Do(mcpHTTPRequest(context.Background(), method, url, token, sid, body))
	if err != nil {
		return -1, ""
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// rawPostHeaders is rawPost with extra headers.
func rawPostHeaders(t *testing.T, url, token, body string, h map[string]string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// TestRedteamInitializeVariantsStayCounted: initializes written so that
// the gateway's skim of the body (rpcHead) may read them otherwise than
// the SDK does, as a notification, with odd ids, or with headers that
// route them elsewhere, never leave a principal more live MCP sessions
// than its cap, whatever they answer.
func TestRedteamInitializeVariantsStayCounted(t *testing.T) {
	const perPrincipal = 2
	_, srv, _ := httpGatewayWith(t, func(c *gateway.Config) {
		c.MaxSessions = 10
		c.MaxSessionsPerPrincipal = perPrincipal
	})
	params := `"params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`
	bodies := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":1,"Method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":1,"METHOD":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"initi\u0061lize",` + params + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","method":"ping",` + params + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":null,"method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":"x\"y","method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","id":1.5e3,"method":"initialize",` + params + `}`,
		`{"jsonrpc":"2.0","method":"initialize",` + params + `}`,
		` {"jsonrpc":"2.0","id":1,"method":"initialize",` + params + `} `,
		`{"params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}},"method":"initialize","id":2,"jsonrpc":"2.0"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize",` + params + `}]`,
	}
	headers := []map[string]string{
		nil,
		{"Mcp-Protocol-Version": "2025-11-25"},
		{"Mcp-Protocol-Version": "2025-06-18"},
		{"Mcp-Protocol-Version": "2026-07-28"},
		{"Mcp-Protocol-Version": "9999"},
		{"Mcp-Session-Id": "nope"},
		{"Mcp-Session-Id": "nope", "Mcp-Protocol-Version": "2026-07-28"},
	}
	var sids []string
	for i, body := range bodies {
		for j, h := range headers {
			for range perPrincipal + 1 {
				code, sid, resp := rawPostHeaders(t, srv.URL, aliceToken, body, h)
				if code == http.StatusOK && sid == "" && strings.Contains(resp, `"result"`) && j < 3 && i < 14 {
					t.Logf("body %d headers %d: %d %.120s", i, j, code, resp)
				}
				if sid != "" {
					sids = append(sids, sid)
				}
			}
			live := 0
			for _, sid := range sids {
				if rawPing(t, srv.URL, aliceToken, sid) == http.StatusOK {
					live++
				}
			}
			if live > perPrincipal {
				t.Fatalf("after body %d with headers %d alice holds %d live MCP sessions, cap %d", i, j, live, perPrincipal)
			}
			if got := metric(t, srv.URL, "policycheck_gateway_mcp_sessions"); got != live {
				t.Fatalf("after body %d with headers %d: the gauge says %d MCP sessions, %d answer", i, j, got, live)
			}
		}
	}
}

// TestRedteamConcurrentLifecycleLeavesNoCount: principals initializing,
// pinging, calling and deleting MCP sessions concurrently (DELETEs racing
// their own initialize's answer, another principal's DELETE of a
// session) never hold more than the caps, and once every session is
// gone the count is back at zero: no place leaks, none is given back
// twice.
func TestRedteamConcurrentLifecycleLeavesNoCount(t *testing.T) {
	const perPrincipal, maxSessions = 3, 5
	g, srv, _ := httpGatewayWith(t, func(c *gateway.Config) {
		c.MaxSessions = maxSessions
		c.MaxSessionsPerPrincipal = perPrincipal
	})
	initialize := `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	call := func(sid string, id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"}}}`, id)
	}
	initialized := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	var mu sync.Mutex
	sids := map[string][]string{}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for w := range 6 {
		token, other := aliceToken, bobToken
		if w%2 == 1 {
			token, other = bobToken, aliceToken
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				code, sid := send(http.MethodPost, srv.URL, token, "", initialize)
				if code != http.StatusOK {
					continue
				}
				mu.Lock()
				sids[token] = append(sids[token], sid)
				mu.Unlock()
				if i%5 == 0 {
					// DELETE at once, concurrently with nothing but the
					// initialize's own end.
					go send(http.MethodDelete, srv.URL, token, sid, "")
					continue
				}
				send(http.MethodPost, srv.URL, token, sid, initialized)
				send(http.MethodPost, srv.URL, token, sid, call(sid, i))
				if c, _ := send(http.MethodDelete, srv.URL, other, sid, ""); c == http.StatusNoContent {
					errs <- fmt.Sprintf("another principal's DELETE of %s: %d", sid, c)
				}
				if i%3 == 0 {
					send(http.MethodDelete, srv.URL, token, sid, "")
				}
				if got := gateway.MCPHeld(g); got > maxSessions || got < 0 {
					errs <- fmt.Sprintf("%d MCP sessions held", got)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("sessions opened: alice %d, bob %d", len(sids[aliceToken]), len(sids[bobToken]))
	for token, list := range sids {
		for _, sid := range list {
			deleteSession(t, srv.URL, token, sid, "2025-11-25")
		}
	}
	until(t, "no MCP session held", func() bool { return metric(t, srv.URL, "policycheck_gateway_mcp_sessions") == 0 })
	// The places are free: each principal opens its cap again.
	for _, token := range []string{aliceToken, bobToken} {
		for i := range perPrincipal - 1 {
			if code, _, body := rawInit(t, srv.URL, token); code != http.StatusOK {
				t.Fatalf("initialize %d after every session ended: %d %s", i, code, body)
			}
		}
	}
}

// TestRedteamFreshStartRacesAcrossReplicas: a stopped session's fresh
// start races on two replicas (calls and listings of its client on both,
// at once, once its stop lapsed): both join one fresh session (one id,
// whose history holds every call either ran), none is answered as lost
// or ended, and the fresh session is empty (the listing is not the
// stopped one's; its budget is whole).
func TestRedteamFreshStartRacesAcrossReplicas(t *testing.T) {
	const ttl = 400 * time.Millisecond
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			var st sessionstore.Store = sessionstore.NewMemory(sessionstore.Options{TTL: ttl})
			if store == "redis" {
				st = redisStore(t, redistest.Start(t, false), sessionstore.Options{TTL: ttl})
			}
			shared := func(c *gateway.Config) { c.SessionTTL = ttl; gateway.UseStore(c, st) }
			a, b := newTestGateway(t, newFakeUpstream(), shared), newTestGateway(t, newFakeUpstream(), shared)
			alice := gateway.Principal{Name: "alice"}
			ca, cb := connect(t, a, alice, nil), connect(t, b, alice, nil)
			call(t, cb, "search_tools", map[string]any{"queries": []string{"write"}})
			for range 3 {
				call(t, ca, "issue_refund", map[string]any{})
			}
			if msg, isErr := call(t, cb, "read_file", map[string]any{"path": "/a"}); !isErr || !strings.HasPrefix(msg, abortPrefix) {
				t.Fatalf("b after the stop: %q", msg)
			}
			stopped := a.SessionIDs()
			time.Sleep(ttl + 50*time.Millisecond)
			var wg sync.WaitGroup
			errs := make(chan string, 40)
			for i, cs := range []*mcp.ClientSession{ca, cb, ca, cb} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range 4 {
						if (i+j)%2 == 0 {
							if _, err := cs.ListTools(context.Background(), nil); err != nil {
								errs <- fmt.Sprintf("client %d listing %d: %v", i, j, err)
							}
							continue
						}
						text, isErr, err := callErr(cs, scriptCall{"read_file", map[string]any{"path": fmt.Sprintf("/%d/%d", i, j)}})
						if err != nil || isErr && !strings.Contains(text, "Call it again") {
							errs <- fmt.Sprintf("client %d call %d: %q %v", i, j, text, err)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			ia, ib := a.SessionIDs(), b.SessionIDs()
			if len(ia) != 1 || len(ib) != 1 || ia[0] != ib[0] || ia[0] == stopped[0] {
				t.Fatalf("sessions after the fresh start: a %v, b %v (stopped %v)", ia, ib, stopped)
			}
			// Fresh: the stopped session's reveal is gone, its budget whole.
			for _, cs := range []*mcp.ClientSession{ca, cb} {
				if names := toolNames(t, cs); slices.Contains(names, "files/write_file") || len(names) == 0 {
					t.Fatalf("the fresh session lists %v", names)
				}
			}
			if msg, _ := call(t, cb, "issue_refund", map[string]any{}); strings.HasPrefix(msg, abortPrefix) {
				t.Fatalf("the fresh session's first refusal: %q", msg)
			}
		})
	}
}

// TestRedteamNoGoroutinePerRequest: MCP sessions initialized and
// deleted, initialized and evicted by the cap, refused, and stateless
// requests leave no goroutine behind once they ended.
func TestRedteamNoGoroutinePerRequest(t *testing.T) {
	_, srv, _ := httpGatewayWith(t, func(c *gateway.Config) { c.MaxSessionsPerPrincipal = 2 })
	stateless := func(i int) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(fmt.Sprintf(
			`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"},"_meta":{"policycheck/session":"h%d"}}}`, i, i%3)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+bobToken)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	round := func(i int) {
		_, sid, _ := rawInit(t, srv.URL, aliceToken)
		rawPost(t, srv.URL, aliceToken, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		rawPost(t, srv.URL, aliceToken, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"}}}`)
		if i%2 == 0 {
			deleteSession(t, srv.URL, aliceToken, sid, "2025-11-25")
		}
		rawPing(t, srv.URL, aliceToken, "nope")
		rawPost(t, srv.URL, aliceToken, "", `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		stateless(i)
	}
	for i := range 10 {
		round(i)
	}
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	for i := range 60 {
		round(i)
	}
	http.DefaultClient.CloseIdleConnections()
	var now int
	deadline := time.Now().Add(3 * time.Second)
	for {
		if now = runtime.NumGoroutine(); now <= before+10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now > before+10 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after 60 rounds, %d before\n%s", now, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestRedteamAnotherPrincipalsSessionIsOutOfReach: bob holding alice's
// Mcp-Session-Id and her _meta handle neither reads, extends, renews nor
// ends her sessions: his POST, GET and DELETE of her MCP session are
// refused and do not make it more recently used (her next initialize
// past her cap still closes it as her least recently used), and his
// calls under her handle reach his own session, where her reveal is not.
func TestRedteamAnotherPrincipalsSessionIsOutOfReach(t *testing.T) {
	_, srv, _ := httpGatewayWith(t, func(c *gateway.Config) { c.MaxSessionsPerPrincipal = 2 })
	_, first, _ := rawInit(t, srv.URL, aliceToken)
	_, second, _ := rawInit(t, srv.URL, aliceToken)
	// second is her most recently used, first her least.
	if rawPing(t, srv.URL, aliceToken, second) != http.StatusOK {
		t.Fatal("alice's second session")
	}
	for range 3 {
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			body := ""
			if m == http.MethodPost {
				body = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"}}}`
			}
			if code, _ := send(m, srv.URL, bobToken, first, body); code != http.StatusForbidden {
				t.Fatalf("bob's %s of alice's MCP session: %d", m, code)
			}
		}
	}
	if code, _, body := rawInit(t, srv.URL, aliceToken); code != http.StatusOK {
		t.Fatalf("alice's third initialize: %d %s", code, body)
	}
	if rawPing(t, srv.URL, aliceToken, first) != http.StatusNotFound || rawPing(t, srv.URL, aliceToken, second) != http.StatusOK {
		t.Fatal("bob's requests of alice's least recently used MCP session kept it from being closed")
	}

	// Handles: alice reveals under h; bob's call under h is his own.
	alice := httpClient(t, srv.URL, aliceToken, "2026-07-28")
	bob := httpClient(t, srv.URL, bobToken, "2026-07-28")
	callMeta(t, alice, "h", "search_tools", map[string]any{"queries": []string{"write"}})
	if msg, isErr := callMeta(t, alice, "h", "files/write_file", map[string]any{}); isErr {
		t.Fatalf("alice's revealed tool: %q", msg)
	}
	if msg, isErr := callMeta(t, bob, "h", "files/write_file", map[string]any{}); !isErr {
		t.Fatalf("bob under alice's handle ran her revealed tool: %q", msg)
	}
}

// TestRedteamStopOutlivesAnUnwrittenAbort: a call that exceeds the
// retry budget stops the session even when the store cannot take the
// abort that answers it. A client can bring that about on its own: the
// call is written before it is decided on (it fits in the history's size
// limit), the abort after (with a long tool name, written twice in it,
// it does not), while a short call, with the answer the gateway writes
// for an unanswered one, still fits. Before, the refused write dropped
// the replica's state and the stop with it: the client was told its
// session stopped, and its next call ran, on this replica and another.
func TestRedteamStopOutlivesAnUnwrittenAbort(t *testing.T) {
	const limit, ttl = 8000, 2 * time.Second
	st := sessionstore.NewMemory(sessionstore.Options{MaxBytes: limit, TTL: ttl})
	cfg := func(c *gateway.Config) { c.MaxSessionBytes = limit; c.SessionTTL = ttl; gateway.UseStore(c, st) }
	a, b := newTestGateway(t, newFakeUpstream(), cfg), newTestGateway(t, newFakeUpstream(), cfg)
	long := strings.Repeat("n", 1024)
	// stop stops principal p's session on a: an unknown tool refused
	// (charged), then a second one exceeding the budget, its arguments
	// pad bytes, both of the same long name. It answers the second
	// call.
	stop := func(p string, pad int) (*mcp.ClientSession, string) {
		cs := connect(t, a, gateway.Principal{Name: p}, nil)
		if msg, isErr := call(t, cs, long, map[string]any{}); !isErr || strings.Contains(msg, "exceeded") {
			t.Fatalf("the first unknown tool: %q", msg)
		}
		msg, _ := call(t, cs, long, map[string]any{"pad": strings.Repeat("x", pad)})
		return cs, msg
	}
	// The largest pad that fits (the abort then does not), found with a
	// session of its own: a call that does not fit runs nothing.
	fits := -1
	for pad := limit; pad > 0; pad -= 25 {
		if _, msg := stop(fmt.Sprintf("probe%d", pad), pad); !strings.Contains(msg, "the most the gateway keeps") {
			fits = pad
			break
		}
	}
	if fits < 0 {
		t.Fatal("no pad fits")
	}
	tried := 0
	var stopped []*mcp.ClientSession
	for _, room := range []int{1300, 1500, 1700, 1900} {
		p := fmt.Sprintf("alice%d", room)
		cs, msg := stop(p, fits-room)
		if !strings.HasPrefix(msg, "Tool '"+long+"' exceeded max retries count of 1.") {
			t.Fatalf("room %d: the call that exceeds the budget answered %.100q", room, msg)
		}
		for _, c := range []*mcp.ClientSession{cs, connect(t, b, gateway.Principal{Name: p}, nil)} {
			msg, isErr := call(t, c, "read_file", map[string]any{"path": "/a"})
			if !isErr {
				t.Fatalf("room %d: a call after the stop ran: %q", room, msg)
			}
			if strings.Contains(msg, "the most the gateway keeps") {
				continue // no room left for it either: not a case
			}
			tried++
			if !strings.Contains(msg, "exceeded max retries count of 1.") {
				t.Fatalf("room %d: a call after the stop: %.200q", room, msg)
			}
			stopped = append(stopped, c)
		}
	}
	if tried == 0 {
		t.Fatal("no case left room for a call after the abort")
	}
	// The stop ends --session-ttl after the call: then a fresh session.
	for _, c := range stopped {
		until(t, "a fresh session", func() bool {
			time.Sleep(50 * time.Millisecond)
			_, isErr := call(t, c, "read_file", map[string]any{"path": "/a"})
			return !isErr
		})
	}
}
