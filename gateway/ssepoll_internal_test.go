package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// fixedRT answers every request with a copy of its status, content type
// and body.
type fixedRT struct {
	status int
	ctype  string
	body   string
}

func (f fixedRT) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: f.status, Header: http.Header{"Content-Type": {f.ctype}}, Body: io.NopCloser(strings.NewReader(f.body)), ContentLength: int64(len(f.body))}, nil
}

// TestKeepLastEventID: a 200 event stream answering a GET with
// Last-Event-ID starts with an event holding only that id; everything
// else passes unchanged.
func TestKeepLastEventID(t *testing.T) {
	const body = "event: close\nretry: 10\ndata: \n\n"
	for _, c := range []struct {
		name, method, lastID string
		rt                   fixedRT
		want                 string
	}{
		{"resumed", http.MethodGet, "s_3", fixedRT{200, "text/event-stream", body}, "id: s_3\n\n" + body},
		{"resumed, media type parameters", http.MethodGet, "s_3", fixedRT{200, "text/event-stream; charset=utf-8", body}, "id: s_3\n\n" + body},
		{"not resumed", http.MethodGet, "", fixedRT{200, "text/event-stream", body}, body},
		{"a POST", http.MethodPost, "s_3", fixedRT{200, "text/event-stream", body}, body},
		{"refused", http.MethodGet, "s_3", fixedRT{400, "text/plain", "stream replay unsupported"}, "stream replay unsupported"},
		{"not a stream", http.MethodGet, "s_3", fixedRT{200, "application/json", "{}"}, "{}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, "http://upstream.test/mcp", nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.lastID != "" {
				req.Header.Set("Last-Event-ID", c.lastID)
			}
			resp, err := keepLastEventID{next: c.rt}.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := resp.Body.Close(); err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("body %q, want %q", got, c.want)
			}
			if string(got) != c.rt.body && resp.ContentLength != -1 {
				t.Errorf("ContentLength %d of a body the wrapper lengthened", resp.ContentLength)
			}
		})
	}
}
