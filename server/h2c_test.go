package server_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/server"
)

// h2cClient speaks only HTTP/2 without TLS, with prior knowledge.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: 30 * time.Second}
}

// h2cPost posts body to url over HTTP/2 without TLS and returns the
// answer, requiring that it came over HTTP/2.
func h2cPost(t *testing.T, client *http.Client, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := client.Post(url, contentType, bytes.NewReader(body))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "HTTP/2.0", resp.Proto)
	return resp.StatusCode, got
}

// TestH2C: with H2C, a client speaking HTTP/2 without TLS gets, over one
// connection, the answers an HTTP/1.1 client gets; HTTP/1.1 is still
// served; without H2C such a client gets no answer; New refuses H2C with
// TLS.
func TestH2C(t *testing.T) {
	rs := start(t, testReg(t), withH2C())
	body := []byte(`{"history": ` + testHistory + `}`)
	status, want := rs.post(t, "/v1/decide", body)
	require.Equal(t, http.StatusOK, status, string(want))

	client := h2cClient()
	defer client.CloseIdleConnections()
	for _, path := range []string{"/v1/decide", "/v1/decide", "/v1/runs/h2/decide"} {
		b := body
		if strings.HasPrefix(path, "/v1/runs/") {
			b = []byte(`{"offset": 0, "messages": ` + testHistory + `}`)
		}
		status, got := h2cPost(t, client, rs.url+path, "application/json", b)
		require.Equal(t, http.StatusOK, status, string(got))
		if path == "/v1/decide" {
			require.Equal(t, string(want), string(got))
		}
	}
	// An error is answered over HTTP/2 as well.
	status, got := h2cPost(t, client, rs.url+"/v1/decide", "application/x-yaml", body)
	require.Equal(t, http.StatusUnsupportedMediaType, status, string(got))
	require.Equal(t, server.CodeMediaType, decodeError(t, got).Error.Code)

	plain := start(t, testReg(t))
	_, err := client.Post(plain.url+"/v1/decide", "application/json", bytes.NewReader(body))
	require.Error(t, err, "without H2C, HTTP/2 without TLS is not spoken")

	_, err = newServer(withH2C(), withTLS(&tls.Config{MinVersion: tls.VersionTLS12}), testReg(t))
	require.ErrorContains(t, err, "H2C serves HTTP/2 without TLS")
}

// TestH2CSlowBodyIsCutOff: over HTTP/2 too, a body still arriving after
// the body deadline gets 408 rather than holding the server.
func TestH2CSlowBodyIsCutOff(t *testing.T) {
	rs := start(t, testReg(t), withH2C(), withBodyTimeout(300*time.Millisecond))
	pr, pw := io.Pipe()
	go func() { // one byte every 50 ms: the whole body would take seconds
		body := `{"history": ` + testHistory + `}`
		for i := 0; i < len(body); i++ {
			if _, err := pw.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		pw.Close()
	}()
	defer pw.Close()
	client := h2cClient()
	defer client.CloseIdleConnections()
	start := time.Now()
	resp, err := client.Post(rs.url+"/v1/decide", "application/json", pr)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "HTTP/2.0", resp.Proto)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(got))
	require.Equal(t, server.CodeBodyTimeout, decodeError(t, got).Error.Code)
	require.Less(t, time.Since(start), 5*time.Second)
}
