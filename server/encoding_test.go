package server_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/server"
)

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestGzipBodies: a body sent with Content-Encoding: gzip (or x-gzip, in
// any case) is read decompressed and answered exactly as the same body
// sent as is, on the stateless and the incremental endpoints.
func TestGzipBodies(t *testing.T) {
	rs := start(t, testReg(t))
	plainBody := []byte(`{"history": ` + testHistory + `, "context": {"user": "ana"}}`)
	runBody := []byte(`{"offset": 0, "messages": ` + testHistory + `}`)
	for _, path := range []string{"/v1/decide", "/v1/facts", "/v1/explain"} {
		ws, want := rs.post(t, path, plainBody)
		require.Equal(t, http.StatusOK, ws, string(want))
		for _, enc := range []string{"gzip", "x-gzip", "GZIP", "identity, gzip"} {
			gs, got := rs.post(t, path, gzipBytes(t, plainBody), "Content-Encoding", enc)
			require.Equal(t, ws, gs, "%s, %s: %s", path, enc, got)
			require.Equal(t, string(want), string(got), "%s, %s", path, enc)
		}
	}
	ws, want := rs.post(t, "/v1/runs/plain/decide", runBody)
	require.Equal(t, http.StatusOK, ws, string(want))
	// The same run started again: the same messages, the same generation.
	gs, got := rs.post(t, "/v1/runs/plain/decide", gzipBytes(t, runBody), "Content-Encoding", "gzip")
	require.Equal(t, ws, gs, string(got))
	require.Equal(t, string(want), string(got))
	// Two gzip members in a row are one body, as gzip reads them.
	half := len(plainBody) / 2
	two := append(gzipBytes(t, plainBody[:half]), gzipBytes(t, plainBody[half:])...)
	_, want = rs.post(t, "/v1/decide", plainBody)
	gs, got = rs.post(t, "/v1/decide", two, "Content-Encoding", "gzip")
	require.Equal(t, http.StatusOK, gs, string(got))
	require.Equal(t, string(want), string(got))
}

// TestBodyEncodingsRefused: a Content-Encoding other than gzip is refused
// with 415 rather than read as the JSON it is not; a gzip body that does
// not decompress is refused with 400; the body limit bounds what a gzip
// body decompresses to (a small body that inflates past it gets 413), as
// well as what arrives.
func TestBodyEncodingsRefused(t *testing.T) {
	rs := start(t, testReg(t), withMaxBody(64<<10))
	plainBody := []byte(`{"history": ` + testHistory + `}`)
	for _, enc := range []string{"br", "deflate", "zstd", "gzip, gzip", "gzip, br"} {
		status, out := rs.post(t, "/v1/decide", plainBody, "Content-Encoding", enc)
		require.Equal(t, http.StatusUnsupportedMediaType, status, "%s: %s", enc, out)
		require.Equal(t, server.CodeEncoding, decodeError(t, out).Error.Code, enc)
	}
	zipped := gzipBytes(t, plainBody)
	corrupt := append([]byte{}, zipped...)
	corrupt[len(corrupt)-5] ^= 0xff // the checksum's
	for note, body := range map[string][]byte{
		"not gzip":  plainBody,
		"truncated": zipped[:len(zipped)/2],
		"corrupt":   corrupt,
		"empty":     nil,
	} {
		status, out := rs.post(t, "/v1/decide", body, "Content-Encoding", "gzip")
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", note, out)
		e := decodeError(t, out).Error
		require.Equal(t, server.CodeSyntax, e.Code, note)
		require.Contains(t, e.Message, "does not decompress", note)
	}
	// 1 MB of spaces inside valid JSON compresses to about a kilobyte.
	bomb := gzipBytes(t, []byte(`{"history": [`+strings.Repeat(" ", 1<<20)+`]}`))
	require.Less(t, len(bomb), 64<<10)
	status, out := rs.post(t, "/v1/decide", bomb, "Content-Encoding", "gzip")
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(out))
	require.Equal(t, server.CodeLimit, decodeError(t, out).Error.Code)
	// Over the limit as sent: 413 too, not a decompression error. Stored
	// uncompressed, the body reaches the limit as sent before it does
	// decompressed.
	var stored bytes.Buffer
	zw, err := gzip.NewWriterLevel(&stored, gzip.NoCompression)
	require.NoError(t, err)
	_, err = zw.Write([]byte(`{"history": [], "context": {"x": "` + strings.Repeat("a", 128<<10) + `"}}`))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	big := stored.Bytes()
	require.Greater(t, len(big), 64<<10)
	status, out = rs.post(t, "/v1/decide", big, "Content-Encoding", "gzip")
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(out))
	require.Equal(t, server.CodeLimit, decodeError(t, out).Error.Code)
	// ... and sent chunked, with no length declared to refuse up front.
	req, err := http.NewRequest(http.MethodPost, rs.url+"/v1/decide", io.MultiReader(bytes.NewReader(big)))
	require.NoError(t, err)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := rs.client.Do(req)
	require.NoError(t, err)
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(out))
	require.Equal(t, server.CodeLimit, decodeError(t, out).Error.Code)
	// Just under the limit once decompressed: read.
	under := []byte(`{"history": ` + testHistory + strings.Repeat(" ", 64<<10-len(plainBody)) + `}`)
	require.Len(t, under, 64<<10)
	status, out = rs.post(t, "/v1/decide", gzipBytes(t, under), "Content-Encoding", "gzip")
	require.Equal(t, http.StatusOK, status, string(out))
}

// TestBodyLimitBoundary: --max-body N reads a body of N bytes and refuses
// one of N+1 with 413, whether it is sent plain (with its length, or
// chunked with none) or gzip-compressed: the limit bounds what a gzip
// body decompresses to exactly as it bounds a plain one.
func TestBodyLimitBoundary(t *testing.T) {
	const limit = 64 << 10
	rs := start(t, testReg(t), withMaxBody(limit))
	head := `{"history": ` + testHistory
	body := func(n int) []byte {
		b := []byte(head + strings.Repeat(" ", n-len(head)-1) + `}`)
		require.Len(t, b, n)
		return b
	}
	chunked := func(b []byte, header ...string) (int, []byte) {
		// A reader that is not a *bytes.Reader: no length is declared.
		return rs.send(t, http.MethodPost, "/v1/decide", io.MultiReader(bytes.NewReader(b)), header...)
	}
	for _, c := range []struct {
		n    int
		want int
	}{{limit, http.StatusOK}, {limit + 1, http.StatusRequestEntityTooLarge}} {
		b := body(c.n)
		for note, send := range map[string]func() (int, []byte){
			"plain":         func() (int, []byte) { return rs.post(t, "/v1/decide", b) },
			"plain chunked": func() (int, []byte) { return chunked(b) },
			"gzip":          func() (int, []byte) { return rs.post(t, "/v1/decide", gzipBytes(t, b), "Content-Encoding", "gzip") },
			"gzip chunked":  func() (int, []byte) { return chunked(gzipBytes(t, b), "Content-Encoding", "gzip") },
		} {
			status, out := send()
			require.Equal(t, c.want, status, "%d bytes, %s: %s", c.n, note, out)
			if c.want != http.StatusOK {
				e := decodeError(t, out).Error
				require.Equal(t, server.CodeLimit, e.Code, "%d bytes, %s", c.n, note)
				require.Contains(t, e.Message, "over the limit of 65536 bytes", "%d bytes, %s", c.n, note)
			}
		}
	}
}

// TestSlowGzipBodyIsCutOff: the body deadline holds for a gzip body, and
// its expiry is the body's timeout (408), not a decompression error.
func TestSlowGzipBodyIsCutOff(t *testing.T) {
	rs := start(t, testReg(t), withBodyTimeout(300*time.Millisecond))
	conn, err := net.Dial("tcp", rs.addr)
	require.NoError(t, err)
	defer conn.Close()
	body := gzipBytes(t, []byte(`{"history": `+testHistory+`}`))
	_, err = fmt.Fprintf(conn, "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	_, err = conn.Write(body[:len(body)/2]) // and the rest never
	require.NoError(t, err)
	requireBodyTimeout(t, conn)
}

// TestBodyMediaTypes: a body is read as JSON when it declares no type, a
// JSON one, or a label clients put on a string they send without naming
// its type (curl -d, fetch); every endpoint answers it as it answers the
// same body sent as application/json. Any other type, YAML among them, a
// charset other than UTF-8, a type that does not parse or one sent twice
// is refused with 415 before the body is read, rather than read as the
// JSON it says it is not.
func TestBodyMediaTypes(t *testing.T) {
	rs := start(t, testReg(t))
	plainBody := []byte(`{"history": ` + testHistory + `, "context": {"user": "ana"}}`)
	runBody := []byte(`{"offset": 0, "messages": ` + testHistory + `}`)
	accepted := []string{
		"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8",
		"application/json;charset=utf8", "application/vnd.example+json",
		"text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
	}
	for _, path := range []string{"/v1/decide", "/v1/facts", "/v1/explain"} {
		ws, want := rs.post(t, path, plainBody)
		require.Equal(t, http.StatusOK, ws, string(want))
		for _, ct := range accepted {
			gs, got := rs.post(t, path, plainBody, "Content-Type", ct)
			require.Equal(t, ws, gs, "%s, %s: %s", path, ct, got)
			require.Equal(t, string(want), string(got), "%s, %s", path, ct)
		}
	}
	for i, ct := range accepted {
		status, out := rs.post(t, fmt.Sprintf("/v1/runs/typed-%d/decide", i), runBody, "Content-Type", ct)
		require.Equal(t, http.StatusOK, status, "%s: %s", ct, out)
	}

	refused := map[string]string{
		"application/x-yaml":                 "YAML bodies are not read",
		"application/yaml":                   "YAML bodies are not read",
		"text/yaml; charset=utf-8":           "YAML bodies are not read",
		"application/xml":                    `"application/xml" is not read`,
		"application/octet-stream":           "send the body as JSON",
		"multipart/form-data; boundary=x":    "send the body as JSON",
		"application/json; charset=latin1":   `charset "latin1" is not read`,
		"application/json; charset=utf-16":   `charset "utf-16" is not read`,
		"application/json; charset":          "does not parse",
		"json":                               `"json" is not read`,
		"application/json, application/yaml": "does not parse",
	}
	for ct, msg := range refused {
		for _, path := range []string{"/v1/decide", "/v1/facts", "/v1/explain", "/v1/runs/refused/decide"} {
			body := plainBody
			if strings.HasPrefix(path, "/v1/runs/") {
				body = runBody
			}
			status, out := rs.post(t, path, body, "Content-Type", ct)
			require.Equal(t, http.StatusUnsupportedMediaType, status, "%s, %s: %s", path, ct, out)
			e := decodeError(t, out).Error
			require.Equal(t, server.CodeMediaType, e.Code, "%s, %s", path, ct)
			require.Contains(t, e.Message, msg, "%s, %s", path, ct)
		}
	}
	// The refused run was not started: its first accepted step is offset 0.
	status, out := rs.post(t, "/v1/runs/refused/decide", runBody)
	require.Equal(t, http.StatusOK, status, string(out))

	// Sent twice, even both JSON: which one a proxy keeps is not known.
	req, err := http.NewRequest(http.MethodPost, rs.url+"/v1/decide", bytes.NewReader(plainBody))
	require.NoError(t, err)
	req.Header.Add("Content-Type", "application/json")
	req.Header.Add("Content-Type", "application/json")
	resp, err := rs.client.Do(req)
	require.NoError(t, err)
	out, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, string(out))
	require.Contains(t, decodeError(t, out).Error.Message, "sent 2 times")

	// The type is checked before the encoding, and a gzip body of a
	// JSON type is read.
	status, out = rs.post(t, "/v1/decide", gzipBytes(t, plainBody), "Content-Type", "application/x-yaml", "Content-Encoding", "gzip")
	require.Equal(t, http.StatusUnsupportedMediaType, status, string(out))
	require.Equal(t, server.CodeMediaType, decodeError(t, out).Error.Code)
	status, out = rs.post(t, "/v1/decide", gzipBytes(t, plainBody), "Content-Type", "application/json", "Content-Encoding", "gzip")
	require.Equal(t, http.StatusOK, status, string(out))
}
