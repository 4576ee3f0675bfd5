package mcpinterop_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
	"github.com/policycheck/policycheck/internal/testkit/mcpinterop"
	"github.com/policycheck/policycheck/internal/testkit/syncbuf"
)

// The conformance scenario server-sse-polling with no gateway: the Go
// SDK's streamable client (v1.8.0) against a server that closes a call's
// SSE stream mid-call (SEP-1699) as the SDK's conformance
// everything-server's test_reconnection does. These tests hold the SDK's
// behaviour today, which docs/gateway-interop.md explains; one that fails
// after an SDK upgrade says that behaviour changed (and what the gateway
// does about it may go: gateway/ssepoll.go).

// exchange is one HTTP request of a client and what answered it; body is
// what the client read of a POST's event stream.
type exchange struct {
	method, lastEventID string
	status              int
	body                *syncbuf.Buffer
}

// recorder is an http.RoundTripper that records the exchanges of a
// client, keeping a copy of what the client reads of each tools/call
// POST's answer.
type recorder struct {
	mu  sync.Mutex
	log []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var call bool
	if req.Method == http.MethodPost && req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			raw, _ := io.ReadAll(b)
			call = bytes.Contains(raw, []byte(`"tools/call"`))
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	x := exchange{method: req.Method, lastEventID: req.Header.Get("Last-Event-ID"), status: resp.StatusCode}
	if call {
		x.body = &syncbuf.Buffer{}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, x.body), resp.Body}
	}
	r.mu.Lock()
	r.log = append(r.log, x)
	r.mu.Unlock()
	return resp, nil
}

// calls is the exchanges that posted a tools/call; resumptions the GETs
// that carried a Last-Event-ID.
func (r *recorder) calls() (calls, resumptions []exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.log {
		switch {
		case x.body != nil:
			calls = append(calls, x)
		case x.method == http.MethodGet && x.lastEventID != "":
			resumptions = append(resumptions, x)
		}
	}
	return calls, resumptions
}

// goSDKClient connects the Go SDK's streamable client to url asking for
// protocol, with MaxRetries retries (0: the SDK's default, 5), recording
// its exchanges.
func goSDKClient(t *testing.T, url, protocol string, retries int) (*mcp.ClientSession, *recorder) {
	t.Helper()
	rec := &recorder{}
	c := mcp.NewClient(&mcp.Implementation{Name: "sse-polling-test"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: rec}, MaxRetries: retries, DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs, rec
}

// callTool calls name with a deadline.
func callTool(cs *mcp.ClientSession, name string) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
}

// hasEventID says an SSE body holds an event with an id.
func hasEventID(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "id:") {
			return true
		}
	}
	return false
}

// TestSSEPollingEverythingServerLosesTheAnswer: the Go SDK's conformance
// everything-server as the conformance tests run it (streamable HTTP with
// sessions, no event store) and its test_reconnection, which closes the
// call's stream at once, then answers 100 ms later. On 2025-11-25 the
// stream ends with a close event that has a retry field and no id, and
// no event before it had one; on 2025-03-26 it ends with no event at
// all. Either way there is nothing to resume from: the client sends no
// GET, and the SDK's client fails the call with "request terminated
// without response" (its stream ended with no id and no answer, so it
// cannot resume). Nor could any client get the answer: the server
// writes it to a stream no request holds any more and, keeping no
// events, drops it. The session stays usable. This is why the conformance
// suite's server-sse-polling, whose own client asks for 2025-03-26 and
// counts an answer it never gets as no failure, passes against the
// upstream alone, and why the gateway, which gets the same nothing from
// the upstream and answers its client that the call failed, fails it.
func TestSSEPollingEverythingServerLosesTheAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Go SDK's conformance everything-server")
	}
	url := startEverythingServer(t, mcpinterop.BuildEverythingServer(t))
	for _, protocol := range []string{"2025-11-25", "2025-03-26"} {
		t.Run(protocol, func(t *testing.T) {
			cs, rec := goSDKClient(t, url, protocol, 0)
			_, err := callTool(cs, "test_reconnection")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "request terminated without response")
			calls, resumptions := rec.calls()
			require.Len(t, calls, 1)
			body := calls[0].body.String()
			assert.False(t, hasEventID(body), "the call's stream held an event id: %q", body)
			if protocol == "2025-11-25" {
				assert.Contains(t, body, "event: close")
				assert.Contains(t, body, "retry: 10")
			} else {
				assert.Empty(t, body)
			}
			assert.Empty(t, resumptions, "the client resumed a stream with no event id")
			// The session is still usable.
			res, err := callTool(cs, "test_simple_text")
			require.NoError(t, err)
			assert.False(t, res.IsError, "%s", gatewaytest.Text(res))
		})
	}
}

// pollingServer is a Go SDK server over streamable HTTP with an event
// store whose poll tool closes the call's stream closes times in a row,
// each time once the client resumed it and with nothing sent between,
// and then answers "done".
func pollingServer(t *testing.T, closes int) string {
	t.Helper()
	var gets atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "polling"}, nil)
	srv.AddTool(&mcp.Tool{Name: "poll", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := range closes {
				before := gets.Load()
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
				if i == closes-1 {
					break // the answer: the event store keeps it for the client's GET
				}
				// A close of a stream no request holds does nothing:
				// wait for the client's GET to hold it.
				for deadline := time.Now().Add(5 * time.Second); gets.Load() == before && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			gets.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestSSEPollingResumableServer: against a server that keeps its
// streams' events, the call's stream begins with a priming event that has
// an id, and the SDK's client resumes it with GET and that Last-Event-ID
// and gets the answer, with its default retries. With MaxRetries
// negative (no retries) it does not resume: it fails the whole session
// ("connection aborted after 0 attempts"), the call with it, at the first
// close. And when the server closes the resumed stream again before it
// sent any event on it, the client, which takes a stream's last event id
// from that stream's events alone, has none and fails the call ("request
// terminated without response") instead of resuming again from the id it
// had. The gateway sets retries and keeps that id for the client
// (gateway/ssepoll.go, TestUpstreamPollingOverHTTP).
func TestSSEPollingResumableServer(t *testing.T) {
	t.Run("one close", func(t *testing.T) {
		cs, rec := goSDKClient(t, pollingServer(t, 1), "2025-11-25", 0)
		res, err := callTool(cs, "poll")
		require.NoError(t, err)
		assert.Equal(t, "done", gatewaytest.Text(res))
		calls, resumptions := rec.calls()
		require.Len(t, calls, 1)
		assert.True(t, hasEventID(calls[0].body.String()), "no event id: %q", calls[0].body.String())
		require.Len(t, resumptions, 1)
		assert.Equal(t, http.StatusOK, resumptions[0].status)
	})
	t.Run("no retries", func(t *testing.T) {
		cs, rec := goSDKClient(t, pollingServer(t, 1), "2025-11-25", -1)
		_, err := callTool(cs, "poll")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "connection aborted after 0 attempts")
		_, resumptions := rec.calls()
		assert.Empty(t, resumptions)
	})
	t.Run("two closes", func(t *testing.T) {
		cs, rec := goSDKClient(t, pollingServer(t, 2), "2025-11-25", 0)
		_, err := callTool(cs, "poll")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "request terminated without response")
		_, resumptions := rec.calls()
		assert.Len(t, resumptions, 1, "the client resumed the second time")
	})
}
