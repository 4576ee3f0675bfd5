package gateway

import (
	"io"
	"mime"
	"net/http"
	"strings"
)

// Polling a call's stream (SEP-1699, protocol 2025-11-25): an upstream
// over streamable HTTP may end the SSE stream of a call's POST before it
// answers, after it sent an event with an id; its client is to reconnect
// with GET and Last-Event-ID, and the upstream replays what came after
// that event and goes on with the call on the new stream. It may do that
// again on the new stream.
//
// The Go SDK's streamable client (v1.8.0) resumes such a stream only
// when MaxRetries is at least 1 (upstreamSSERetries), and it takes the
// stream as lost for good, failing the call with "request terminated
// without response", when a stream it resumed ends again without an event
// id of its own: it forgets the Last-Event-ID it resumed from, where an
// SSE client keeps its last event id across reconnections. keepLastEventID
// makes up for that.

// upstreamSSERetries is the StreamableClientTransport.MaxRetries of the
// gateway's HTTP upstreams: how many times in a row the SDK's client
// reconnects a stream that ended without progress (no new event id)
// before it fails the upstream's session, which supervise then
// reconnects. Below 1 it never resumes a call's stream the upstream
// closed for polling: it fails the whole session at the first close
// instead. With 2 a call's stream the upstream closes three times in a
// row with nothing sent between is still resumed, the fourth close fails
// the session. It also bounds how long the standalone stream of an
// upstream that went away is retried before the session fails and
// /health says so: two attempts, after 1 to 2 s and 1.5 to 3 s (the
// SDK's backoff); the SDK's default of 5 takes 13 to 26 s. Until then
// that upstream's calls fail, as they do once it is down.
const upstreamSSERetries = 2

// upstreamHTTPClient is the HTTP client of the gateway's streamable HTTP
// upstreams.
func upstreamHTTPClient() *http.Client {
	return &http.Client{Transport: keepLastEventID{next: http.DefaultTransport}}
}

// keepLastEventID is an http.RoundTripper that starts the body of an SSE
// stream resumed by GET with Last-Event-ID with an event holding only
// that id, so that the SDK's client, which reads a stream's last event id
// from that stream's own events, still has it when the stream ends before
// any other event (see above) and resumes from it again instead of
// failing the call. An event with an id and no data is no message: the
// client only records the id, and an event the upstream replays or sends
// after it carries its own id, which replaces it. Nothing else is
// changed: other requests, and answers that are not a 200 event stream,
// pass as they are.
type keepLastEventID struct {
	next http.RoundTripper
}

func (k keepLastEventID) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := k.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	id := req.Header.Get("Last-Event-ID")
	// net/http sends no header value with a line break; the check keeps the
	// event well formed whatever the transport below.
	if id == "" || strings.ContainsAny(id, "\r\n\x00") || resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		return resp, nil
	}
	resp.Body = resumedBody{Reader: io.MultiReader(strings.NewReader("id: "+id+"\n\n"), resp.Body), Closer: resp.Body}
	resp.ContentLength = -1
	return resp, nil
}

// resumedBody reads the added event, then the upstream's body; Close
// closes the upstream's.
type resumedBody struct {
	io.Reader
	io.Closer
}
