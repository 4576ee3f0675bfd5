package gateway

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGuardOrigin: DNS-rebinding protection accepts the gateway's own
// loopback origin and the allow-list, and refuses every other Origin,
// one equal to a non-loopback Host too.
func TestGuardOrigin(t *testing.T) {
	g := &Gateway{cfg: Config{AllowedOrigins: []string{"https://app.example"}}}
	h := g.guardOrigin(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	listen := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8787}
	for _, tc := range []struct {
		name, host, origin string
		want               int
	}{
		{"no origin", "127.0.0.1:8787", "", 200},
		{"same-origin localhost", "localhost:8787", "http://localhost:8787", 200},
		{"same-origin 127.0.0.1", "127.0.0.1:8787", "http://127.0.0.1:8787", 200},
		{"same-origin [::1]", "[::1]:8787", "http://[::1]:8787", 200},
		{"loopback origin, other loopback host name", "127.0.0.1:8787", "http://localhost:8787", 200},
		{"forwarded loopback port", "localhost:9000", "http://localhost:9000", 200},
		{"evil.com", "127.0.0.1:8787", "http://evil.com", 403},
		{"evil.com with Host evil.com", "evil.com:8787", "http://evil.com:8787", 403},
		{"evil.com with Host evil.com, no port", "evil.com", "http://evil.com", 403},
		{"wrong port", "127.0.0.1:8787", "http://localhost:9999", 403},
		{"wrong port, non-loopback Host", "evil.com:9999", "http://localhost:9999", 403},
		{"loopback origin with a path", "127.0.0.1:8787", "http://localhost:8787/x", 403},
		{"null", "127.0.0.1:8787", "null", 403},
		{"allow-listed", "127.0.0.1:8787", "https://app.example", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://"+tc.host+"/mcp", nil)
			r.Host = tc.host
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(listen)))
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("Origin %q Host %q: %d, want %d", tc.origin, tc.host, w.Code, tc.want)
			}
		})
	}
}
