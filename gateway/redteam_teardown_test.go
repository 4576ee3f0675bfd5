package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
)

// A hostile client's teardowns: it cancels a call mid-flight, drops the
// HTTP request of a call, closes its MCP session while a call waits for
// its approval, or sends a progress token and goes. Each test then
// counts what the gateway still holds: goroutines (against a baseline,
// polled until they settle), the session's lease (another call of the
// same session must run), the calls in flight on the upstreams
// (Relays), the MCP sessions' requests in flight and the caps' places
// (once alice's MCP session ended, bob, with --max-sessions 1, must get
// one), and the sessions in the store.

// blockingUpstream is newFakeUpstream whose read_file, called with
// {"block": true}, signals started and waits for its context to end
// (counted in cancelled) or for release, sending a progress
// notification every 5 ms meanwhile when the call carries a progress
// token; read_file's other calls answer at once.
type blockingUpstream struct {
	*fakeUpstream
	started   chan struct{}
	release   chan struct{}
	cancelled atomic.Int64
}

func newBlockingUpstream() *blockingUpstream {
	b := &blockingUpstream{fakeUpstream: newFakeUpstream(), started: make(chan struct{}, 8), release: make(chan struct{})}
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	b.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if args["block"] != true {
				return ok, nil
			}
			b.started <- struct{}{}
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					b.cancelled.Add(1)
					return nil, ctx.Err()
				case <-b.release:
					return ok, nil
				case <-tick.C:
					if tok := req.Params.GetProgressToken(); tok != nil {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i)})
					}
				}
			}
		})
	return b
}

// teardownGateway serves b over HTTP to alice and bob, with room for one
// session (--max-sessions 1), in a memory store it returns. A call or
// an approval the gateway does not end when its client goes would hold
// its session for ten minutes.
func teardownGateway(t *testing.T, b *blockingUpstream) (*gateway.Gateway, *httptest.Server, *sessionstore.Memory) {
	t.Helper()
	st := sessionstore.NewMemory(sessionstore.Options{})
	g := newTestGateway(t, b.fakeUpstream, func(c *gateway.Config) {
		c.Principals = gateway.NewPrincipals(map[string]gateway.Principal{aliceToken: {Name: "alice"}, bobToken: {Name: "bob"}})
		c.MaxSessions, c.MaxSessionsPerPrincipal = 1, 1
		c.CallTimeout, c.ApprovalTimeout = 10*time.Minute, 10*time.Minute
		c.Logger = nil
		gateway.UseStore(c, st)
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	// First (cleanups run last in, first out): a failed test's blocked
	// call ends, so that the server closes.
	t.Cleanup(func() { close(b.release) })
	return g, srv, st
}

// bobsSession opens an MCP session as bob, calls in it and closes it:
// it fails when alice's session still holds the one place.
func bobsSession(t *testing.T, url string) {
	t.Helper()
	code, sid, body := rawInit(t, url, bobToken)
	if code != http.StatusOK {
		t.Fatalf("bob's initialize: %d %s", code, body)
	}
	rawPost(t, url, bobToken, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if code, body := boundedPost(t, url, bobToken, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`); code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Fatalf("bob's call: %d %s", code, body)
	}
	if code := deleteSession(t, url, bobToken, sid, "2025-11-25"); code != http.StatusNoContent {
		t.Fatalf("bob's DELETE: %d", code)
	}
}

// baseline is the number of goroutines with the gateway up, once a
// session was opened, used and closed (what starts on first use is
// running).
func baseline(t *testing.T, url string) int {
	t.Helper()
	bobsSession(t, url)
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond) // not asserted: lets the first round's goroutines end
	return runtime.NumGoroutine()
}

// nothingHeld checks that once alice's MCP session ended the gateway
// holds nothing of her: no request or call in flight, no session, no
// place under the caps (bob gets the one place), nothing in the store,
// and no goroutine more than before (polled until they settle).
func nothingHeld(t *testing.T, g *gateway.Gateway, url string, st *sessionstore.Memory, before int) {
	t.Helper()
	until(t, "alice's requests leave the count", func() bool { return gateway.MCPRequests(g) == 0 })
	until(t, "alice's MCP session leaves the caps", func() bool { return gateway.MCPHeld(g) == 0 })
	until(t, "alice's session leaves the table", func() bool { return len(g.SessionIDs()) == 0 })
	if n := gateway.Relays(g); n != 0 {
		t.Errorf("%d calls in flight on the upstream", n)
	}
	if n := st.Sessions(); n != 0 {
		t.Errorf("the store holds %d sessions", n)
	}
	const slack = 4
	var now int
	for range 250 {
		http.DefaultClient.CloseIdleConnections()
		if now = runtime.NumGoroutine(); now <= before+slack {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now > before+slack {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after alice left, %d before\n%s", now, before, buf[:runtime.Stack(buf, true)])
	}
	bobsSession(t, url)
}

// boundedPost is rawPost that gives up after a while (a request the
// gateway keeps waiting fails the test instead of hanging it): its
// status and body.
func boundedPost(t *testing.T, url, token, sid, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := streamPost(ctx, url, token, sid, body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", body, err)
	}
	return resp.StatusCode, string(b)
}

// streamPost posts body in MCP session sid (none: "") and returns the
// response unread.
func streamPost(ctx context.Context, url, token, sid, body string) (*http.Response, error) {
	return http.DefaultClient.Do(mcpHTTPRequest(ctx, http.MethodPost, url, token, sid, body))
}

// boundedDelete is deleteSession that fails the test when the DELETE is
// not answered (a DELETE waits for the session's call in flight to end).
func boundedDelete(t *testing.T, url, token, sid string) {
	t.Helper()
	deleted := make(chan int, 1)
	go func() { deleted <- deleteSession(t, url, token, sid, "2025-11-25") }()
	select {
	case code := <-deleted:
		if code != http.StatusNoContent {
			t.Fatalf("the DELETE: %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the DELETE is not answered: it waits for a call its client abandoned")
	}
}

// goPost is streamPost in a goroutine (the SDK sends a stream's headers
// with its first event): the response, nil when none came.
func goPost(ctx context.Context, url, token, sid, body string) <-chan *http.Response {
	c := make(chan *http.Response, 1)
	go func() {
		resp, err := streamPost(ctx, url, token, sid, body)
		if err != nil {
			resp = nil
		}
		c <- resp
	}()
	return c
}

// readUntil reads an SSE stream until a data line holding want; false
// when the stream ends first.
func readUntil(r io.Reader, want string) bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data:") && strings.Contains(line, want) {
			return true
		}
	}
	return false
}

// aliceRaw opens an MCP session as alice with caps (JSON) as her
// capabilities, initialized: its Mcp-Session-Id.
func aliceRaw(t *testing.T, url, caps string) string {
	t.Helper()
	code, sid, body := rawPost(t, url, aliceToken, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"1"}}}`)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %d %s", code, body)
	}
	rawPost(t, url, aliceToken, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// sameSessionCalls checks that alice's MCP session sid still serves a
// call: its lease and its session's lock were given back.
func sameSessionCalls(t *testing.T, url, sid string) {
	t.Helper()
	code, body := boundedPost(t, url, aliceToken, sid, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`)
	if code != http.StatusOK || !strings.Contains(body, `"ok"`) || strings.Contains(body, `"isError":true`) {
		t.Fatalf("the session's next call: %d %s", code, body)
	}
}

const blockingCall = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":{"block":true}%s}}`

// TestRedteamCancelledCallHoldsNothing: a call the client cancels with
// notifications/cancelled ends upstream too, and leaves its session
// callable; once the session ends nothing of it is held.
func TestRedteamCancelledCallHoldsNothing(t *testing.T) {
	b := newBlockingUpstream()
	g, srv, st := teardownGateway(t, b)
	before := baseline(t, srv.URL)
	sid := aliceRaw(t, srv.URL, `{}`)
	done := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := streamPost(ctx, srv.URL, aliceToken, sid, fmt.Sprintf(blockingCall, ""))
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- string(body)
	}()
	<-b.started
	if code, body := boundedPost(t, srv.URL, aliceToken, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"the user moved on"}}`); code != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", code, body)
	}
	until(t, "the upstream's call is cancelled", func() bool { return b.cancelled.Load() == 1 })
	<-done
	sameSessionCalls(t, srv.URL, sid)
	boundedDelete(t, srv.URL, aliceToken, sid)
	nothingHeld(t, g, srv.URL, st, before)
}

// TestRedteamDroppedRequestHoldsNothing: a client that drops the HTTP
// request of a call mid-flight (its connection closes), with or
// without a progress token the upstream's progress is relayed under,
// leaves its session callable; then it ends the MCP session (its
// DELETE), or drops the request with the session's DELETE right after,
// and nothing is held.
func TestRedteamDroppedRequestHoldsNothing(t *testing.T) {
	for _, tc := range []struct {
		note string
		meta string
		// deleteAtOnce: the DELETE follows the drop, before anything is
		// checked.
		deleteAtOnce bool
	}{
		{note: "no progress token"},
		{note: "a progress token", meta: `,"_meta":{"progressToken":"p1"}`},
		{note: "a progress token, then the session's DELETE", meta: `,"_meta":{"progressToken":"p1"}`, deleteAtOnce: true},
	} {
		t.Run(tc.note, func(t *testing.T) {
			b := newBlockingUpstream()
			g, srv, st := teardownGateway(t, b)
			before := baseline(t, srv.URL)
			sid := aliceRaw(t, srv.URL, `{}`)
			ctx, drop := context.WithCancel(context.Background())
			posted := goPost(ctx, srv.URL, aliceToken, sid, fmt.Sprintf(blockingCall, tc.meta))
			<-b.started
			if tc.meta != "" {
				resp := <-posted
				if resp == nil || !readUntil(resp.Body, "notifications/progress") {
					t.Fatal("no progress was relayed")
				}
				drop()
				resp.Body.Close()
			} else {
				drop()
				if resp := <-posted; resp != nil {
					resp.Body.Close()
				}
			}
			if !tc.deleteAtOnce {
				until(t, "the upstream's call is cancelled", func() bool { return b.cancelled.Load() == 1 })
				sameSessionCalls(t, srv.URL, sid)
			}
			boundedDelete(t, srv.URL, aliceToken, sid)
			nothingHeld(t, g, srv.URL, st, before)
		})
	}
}

// TestRedteamDeleteWhileApprovalWaitsHoldsNothing: a client asked to
// approve a call (elicitation/create) that never answers and ends its
// MCP session instead (its DELETE), or only drops the call's request:
// the DELETE is answered, nothing ran upstream and nothing is held.
func TestRedteamDeleteWhileApprovalWaitsHoldsNothing(t *testing.T) {
	for _, tc := range []struct {
		note string
		drop bool // the call's request is dropped before the DELETE
	}{{note: "the DELETE"}, {note: "the request dropped, then the DELETE", drop: true}} {
		t.Run(tc.note, func(t *testing.T) {
			b := newBlockingUpstream()
			g, srv, st := teardownGateway(t, b)
			before := baseline(t, srv.URL)
			sid := aliceRaw(t, srv.URL, `{"elicitation":{}}`)
			ctx, drop := context.WithCancel(context.Background())
			defer drop()
			resp := <-goPost(ctx, srv.URL, aliceToken, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"deploy","arguments":{"env":"prod"}}}`)
			if resp == nil || !readUntil(resp.Body, "elicitation/create") {
				t.Fatal("the approval was not asked")
			}
			if tc.drop {
				drop()
			}
			boundedDelete(t, srv.URL, aliceToken, sid)
			resp.Body.Close()
			nothingHeld(t, g, srv.URL, st, before)
			if n := b.calls.Load(); n != 0 {
				t.Errorf("the upstream ran %d calls of an unapproved deploy", n)
			}
		})
	}
}

// TestRedteamDroppedStatelessRequestHoldsNothing: on 2026-07-28 (no MCP
// session: the POST is the whole request, and the Go SDK's client
// cancels a call by ending it) a call whose request the client drops
// ends upstream too, and its session (a _meta handle) takes the next
// call at once: its lease was given back.
func TestRedteamDroppedStatelessRequestHoldsNothing(t *testing.T) {
	b := newBlockingUpstream()
	g, srv, _ := teardownGateway(t, b)
	before := baseline(t, srv.URL)
	alice := httpClient(t, srv.URL, aliceToken, "2026-07-28")
	meta := mcp.Meta{"policycheck/session": "h"}
	ctx, drop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = alice.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"block": true}, Meta: meta})
	}()
	<-b.started
	drop()
	<-done
	until(t, "the upstream's call is cancelled", func() bool { return b.cancelled.Load() == 1 })
	next, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := alice.CallTool(next, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{}, Meta: meta})
	if err != nil || res.IsError {
		t.Fatalf("the session's next call: %v %v", err, res)
	}
	if n := gateway.Relays(g); n != 0 {
		t.Errorf("%d calls in flight on the upstream", n)
	}
	_ = alice.Close()
	for range 250 {
		http.DefaultClient.CloseIdleConnections()
		if runtime.NumGoroutine() <= before+4 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d goroutines after the dropped request, %d before", runtime.NumGoroutine(), before)
}
