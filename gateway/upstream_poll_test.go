package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
)

// pollingUpstream is an MCP server over streamable HTTP whose read_file
// closes the call's SSE stream mid-call closes times (SEP-1699 polling: a
// close event with a retry field ends the stream), each time with nothing
// else sent, before it answers. With an event store the stream began with
// an event id and can be resumed; without one (as the Go SDK's conformance
// everything-server runs) it cannot, and the answer is lost. gets counts
// the GET requests that carried Last-Event-ID: the resumptions.
type pollingUpstream struct {
	URL    string
	closes int
	gets   atomic.Int64
	calls  atomic.Int64
}

func newPollingUpstream(t *testing.T, closes int, store bool) *pollingUpstream {
	t.Helper()
	p := &pollingUpstream{closes: closes}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files"}, nil)
	srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p.calls.Add(1)
			for i := range p.closes {
				if req.Extra == nil || req.Extra.CloseSSEStream == nil {
					return nil, errNoClose
				}
				before := p.gets.Load()
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
				if !store || i == p.closes-1 {
					// The answer: the event store keeps it for the
					// client's GET; with no event store it is lost.
					continue
				}
				// The next close once the client resumed: a close of a
				// stream no request holds does nothing.
				for deadline := time.Now().Add(5 * time.Second); ctx.Err() == nil && p.gets.Load() == before && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "read_file ran with " + string(req.Params.Arguments)}}}, nil
		})
	opts := &mcp.StreamableHTTPOptions{}
	if store {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			p.gets.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	p.URL = hs.URL
	return p
}

var errNoClose = errors.New("the request has no CloseSSEStream")

// TestUpstreamPollingOverHTTP: an upstream reached over streamable HTTP
// that closes a call's stream mid-call for its client to poll (SEP-1699),
// once or three times in a row, and resumes it on GET with Last-Event-ID:
// the call through the gateway answers with the upstream's result, the
// upstream ran it once, and the upstream stays up for the next call. An
// upstream that closes the stream with no event id to resume from (no
// event store) has lost the answer: the call fails closed, reported as
// its server's failure, and the upstream stays up.
func TestUpstreamPollingOverHTTP(t *testing.T) {
	for _, c := range []struct {
		name   string
		closes int
		store  bool
	}{
		{"one close", 1, true},
		{"three closes in a row", 3, true},
		{"no event store", 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newPollingUpstream(t, c.closes, c.store)
			g := pollingGateway(t, up.URL)
			cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
			for i := range 2 {
				text, isErr := call(t, cs, "read_file", map[string]any{"path": "a.txt"})
				switch {
				case c.store && (isErr || text != `read_file ran with {"path":"a.txt"}`):
					t.Fatalf("call %d: %q, isError %v", i, text, isErr)
				case !c.store && (!isErr || !strings.Contains(text, "its server failed while running it")):
					t.Fatalf("call %d of an answer the upstream lost: %q, isError %v", i, text, isErr)
				}
			}
			if n := up.calls.Load(); n != 2 {
				t.Errorf("the upstream ran %d calls, want 2", n)
			}
			want := int64(0)
			if c.store {
				want = int64(2 * c.closes)
			}
			if n := up.gets.Load(); n != want {
				t.Errorf("the gateway resumed %d times, want %d", n, want)
			}
			if h := g.Health(); len(h.Upstreams) != 1 || h.Upstreams[0].State != gateway.StateUp || h.Upstreams[0].Restarts != 0 {
				t.Errorf("health %+v, want the upstream up, never restarted", h.Upstreams)
			}
		})
	}
}

// pollingGateway is the test gateway with one upstream, files, at url.
func pollingGateway(t *testing.T, url string) *gateway.Gateway {
	t.Helper()
	return newTestGateway(t, newFakeUpstream(), func(cfg *gateway.Config) {
		cfg.Upstreams = []gateway.Upstream{{Name: "files", URL: url}}
	})
}

// waitHealth waits up to d for the upstream's health to satisfy ok and
// returns it, failing the test when it never does.
func waitHealth(t *testing.T, g *gateway.Gateway, d time.Duration, ok func(gateway.UpstreamHealth) bool) gateway.UpstreamHealth {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		h := g.Health().Upstreams[0]
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the upstream's health is %+v", d, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpstreamPollingGivesUp: the Go SDK's client resumes a stream that
// ended with no new event (no progress) twice in a row
// (upstreamSSERetries); the fourth close in a row fails the upstream's
// session, the call fails closed, reported as its server's failure, and
// the gateway reconnects the upstream.
func TestUpstreamPollingGivesUp(t *testing.T) {
	up := newPollingUpstream(t, 4, true)
	g := pollingGateway(t, up.URL)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	text, isErr := call(t, cs, "read_file", map[string]any{"path": "a.txt"})
	if !isErr || !strings.Contains(text, "its server failed while running it") {
		t.Fatalf("%q, isError %v", text, isErr)
	}
	if n := up.gets.Load(); n != 3 {
		t.Errorf("the gateway resumed %d times, want 3", n)
	}
	waitHealth(t, g, 10*time.Second, func(h gateway.UpstreamHealth) bool { return h.State == gateway.StateUp && h.Restarts == 1 })
}

// TestHTTPUpstreamGoneIsDown: an upstream over streamable HTTP that goes
// away (its listener closed, its connections cut) is down on /health
// within seconds (upstreamSSERetries bounds the SDK client's reconnection
// of its standalone stream: 2.5 to 5 s), not after the 13 to 26 s of the
// SDK's default.
func TestHTTPUpstreamGoneIsDown(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "files"}, nil)
	srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "read"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	g := pollingGateway(t, hs.URL)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	if text, isErr := call(t, cs, "read_file", map[string]any{}); isErr {
		t.Fatalf("%q", text)
	}
	start := time.Now()
	if err := hs.Listener.Close(); err != nil {
		t.Fatal(err)
	}
	hs.CloseClientConnections()
	h := waitHealth(t, g, 10*time.Second, func(h gateway.UpstreamHealth) bool { return h.State != gateway.StateUp })
	t.Logf("down after %v: %s", time.Since(start).Round(time.Millisecond), h.LastError)
	if text, isErr := call(t, cs, "read_file", map[string]any{}); !isErr {
		t.Fatalf("a call to the upstream gone answered %q", text)
	}
}
