package server_test

import (
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
	rs := start(t, testReg(t), server.TLS(&tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}))
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
