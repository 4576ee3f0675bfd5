package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/server"
)

// TestGracefulShutdown: once shutdown starts, new connections are refused
// and a request already in flight still gets its decision.
func TestGracefulShutdown(t *testing.T) {
	rs := start(t, testReg(t))
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, rs.url+"/v1/decide", pr)
	require.NoError(t, err)
	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := rs.client.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- answer{status: resp.StatusCode, body: string(b)}
	}()
	// The request is in flight: its body is half sent.
	_, err = pw.Write([]byte(`{"history": `))
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // let the server read the headers
	rs.cancel()
	for {
		c, err := net.Dial("tcp", rs.addr)
		if err != nil {
			break // the listener is closed: shutdown has begun
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	_, err = pw.Write([]byte(testHistory + `}`))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	a := <-got
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, `"verdict": "execute"`)
	require.NoError(t, <-rs.done)
	rs.done <- nil
}

// TestTLS serves HTTPS with the configured certificate.
func TestTLS(t *testing.T) {
	// Borrow httptest's self-signed certificate and a client that trusts it.
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	certs, client := ts.TLS.Certificates, ts.Client()
	ts.Close()
	defer client.CloseIdleConnections()
	rs := start(t, testReg(t), withTLS(&tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}))
	url := strings.Replace(rs.url, "http://", "https://", 1)
	resp, err := client.Post(url+"/v1/decide", "application/json", strings.NewReader(`{"history": `+testHistory+`}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.NotNil(t, resp.TLS)
	// Plain HTTP is not answered with a decision.
	resp, err = rs.client.Post(rs.url+"/v1/decide", "application/json", strings.NewReader(`{"history": []}`))
	if err == nil {
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode)
	}
}

// TestDiagnosticListener: a diagnostic listener serves /health and
// /metrics as the main one does (the token guarding /metrics) and nothing
// else; it answers while the main listener drains a request at shutdown,
// and is closed once Serve returns.
func TestDiagnosticListener(t *testing.T) {
	srv, err := newServer(testReg(t), withToken("s3cret"))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, dl) }()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	api := &running{url: "http://" + ln.Addr().String(), client: client}
	diag := &running{url: "http://" + dl.Addr().String(), client: client}
	auth := []string{"Authorization", "Bearer s3cret"}

	status, body := diag.do(t, http.MethodGet, "/health", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	_, want := api.do(t, http.MethodGet, "/health", nil)
	require.Equal(t, string(want), string(body))
	status, _ = diag.do(t, http.MethodGet, "/metrics", nil)
	require.Equal(t, http.StatusUnauthorized, status)
	status, body = diag.do(t, http.MethodGet, "/metrics", nil, auth...)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), "policycheck_")
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/v1/decide"}, {http.MethodPost, "/v1/facts"}, {http.MethodPost, "/v1/runs/r/decide"},
		{http.MethodDelete, "/v1/runs/r"}, {http.MethodGet, "/debug/pprof/"},
	} {
		status, body = diag.do(t, r.method, r.path, []byte(`{"history": `+testHistory+`}`), auth...)
		require.Equal(t, http.StatusNotFound, status, "%s %s: %s", r.method, r.path, body)
		e := decodeError(t, body).Error
		require.Equal(t, server.CodeNotFound, e.Code)
		require.Contains(t, e.Message, "a diagnostic address serves only /health and /metrics")
	}
	status, body = api.post(t, "/v1/decide", []byte(`{"history": `+testHistory+`}`), auth...)
	require.Equal(t, http.StatusOK, status, string(body))

	// A request in flight on the main listener when shutdown begins:
	// probes are still answered until it is done.
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, api.url+"/v1/decide", pr)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer s3cret")
	got := make(chan int, 1)
	go func() {
		resp, err := (&http.Client{}).Do(req)
		if err != nil {
			got <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	_, err = pw.Write([]byte(`{"history": `))
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // let the server read the headers
	cancel()
	for {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break // the main listener is closed: shutdown has begun
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	status, _ = (&running{url: diag.url, client: &http.Client{Timeout: 10 * time.Second}}).do(t, http.MethodGet, "/health", nil)
	require.Equal(t, http.StatusOK, status, "the diagnostic address answers while a request drains")
	_, err = pw.Write([]byte(testHistory + `}`))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.Equal(t, http.StatusOK, <-got)
	require.NoError(t, <-done)
	_, err = net.Dial("tcp", dl.Addr().String())
	require.Error(t, err, "the diagnostic listener is closed once Serve returns")
}
