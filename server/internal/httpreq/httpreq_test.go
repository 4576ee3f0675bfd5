package httpreq_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/server/internal/httpreq"
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestJSONBody: the types read as JSON, and why each other is refused.
func TestJSONBody(t *testing.T) {
	for _, ct := range []string{"", "application/json", "application/json; charset=UTF-8", "application/problem+json",
		"text/plain;charset=utf8", "application/x-www-form-urlencoded"} {
		h := header()
		if ct != "" {
			h = header("Content-Type", ct)
		}
		require.Nil(t, httpreq.JSONBody(h), ct)
	}
	for ct, why := range map[string]string{
		"application/yaml":                 "YAML bodies are not read",
		"text/html":                        `"text/html" is not read`,
		"application/json; charset=latin1": `charset "latin1" is not read`,
		"application/json; =x":             "does not parse",
	} {
		no := httpreq.JSONBody(header("Content-Type", ct))
		require.NotNil(t, no, ct)
		require.Contains(t, no.Error(), why, ct)
	}
	require.Contains(t, httpreq.JSONBody(header("Content-Type", "application/json", "Content-Type", "application/json")).Msg, "sent 2 times")
}

// TestGzipped: none, identity and gzip are read; anything else, and gzip
// twice, refused.
func TestGzipped(t *testing.T) {
	for enc, want := range map[string]bool{"": false, "identity": false, "gzip": true, "X-GZIP": true, "identity, gzip": true} {
		gz, no := httpreq.Gzipped(header("Content-Encoding", enc))
		require.Nil(t, no, enc)
		require.Equal(t, want, gz, enc)
	}
	for _, enc := range []string{"br", "deflate", "gzip, gzip", "gzip, br"} {
		_, no := httpreq.Gzipped(header("Content-Encoding", enc))
		require.NotNil(t, no, enc)
		require.Contains(t, no.Msg, "is not read", enc)
	}
}

// TestGunzipTellsItsErrorsApart: a body that does not decompress gives
// an *InflateError; the body limit's error keeps its own type.
func TestGunzipTellsItsErrorsApart(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(strings.Repeat("{}", 1000)))
	require.NoError(t, zw.Close())
	zipped := buf.Bytes()

	r, err := httpreq.Gunzip(bytes.NewReader(zipped))
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("{}", 1000), string(got))

	var ie *httpreq.InflateError
	_, err = httpreq.Gunzip(strings.NewReader("not gzip at all"))
	require.ErrorAs(t, err, &ie)
	_, err = httpreq.Gunzip(strings.NewReader(""))
	require.ErrorAs(t, err, &ie)
	r, err = httpreq.Gunzip(bytes.NewReader(zipped[:len(zipped)/2]))
	require.NoError(t, err)
	_, err = io.ReadAll(r)
	require.ErrorAs(t, err, &ie)

	limited := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(bytes.NewReader(zipped)), 12)
	r, err = httpreq.Gunzip(limited)
	require.NoError(t, err) // the header is within the limit
	_, err = io.ReadAll(r)
	var mbe *http.MaxBytesError
	require.True(t, errors.As(err, &mbe), "%v", err)
	require.False(t, errors.As(err, &ie))
}

// TestFromWebPage: Origin, or a Sec-Fetch-Site other than none, marks a
// request a web page made.
func TestFromWebPage(t *testing.T) {
	require.Nil(t, httpreq.FromWebPage(header()))
	require.Nil(t, httpreq.FromWebPage(header("Sec-Fetch-Site", "none")))
	for _, h := range [][]string{{"Origin", "null"}, {"Origin", "https://a.example"}, {"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-origin"}} {
		no := httpreq.FromWebPage(header(h...))
		require.NotNil(t, no, h)
		require.Contains(t, no.Msg, h[0], h)
	}
}
