package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/gen"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// benchServer returns a server on the registry of a generated
// 1,000-message history, and the history's messages.
func benchServer(b *testing.B, opts ...server.Option) (*server.Server, [][]byte) {
	o := gen.Default(1000 + 4096)
	reg, err := loader.ParseRegistry("gen", gen.Registry(7, o))
	require.NoError(b, err)
	srv, err := server.New(append([]server.Option{server.Registry(reg)}, opts...)...)
	require.NoError(b, err)
	return srv, gen.Messages(7, o)
}

func serve(b *testing.B, h http.Handler, path string, body []byte) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		b.Fatalf("%d: %s", rec.Code, rec.Body)
	}
}

// BenchmarkDecideFullHistory decides a 1,000-message history sent whole
// (in process, no network), with and without the schema check.
func BenchmarkDecideFullHistory(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []server.Option
	}{{"schema", nil}, {"decoder_only", []server.Option{server.WithoutSchema()}}} {
		b.Run(bc.name, func(b *testing.B) {
			srv, msgs := benchServer(b, bc.opts...)
			body := mustJSON(b, map[string]json.RawMessage{"history": joinMessages(toRaw(msgs[:1000]))})
			b.SetBytes(int64(len(body)))
			serve(b, srv.Handler(), "/v1/decide", body)
			b.ResetTimer()
			for b.Loop() {
				serve(b, srv.Handler(), "/v1/decide", body)
			}
		})
	}
}

// BenchmarkRunAppend appends one message per request to runs primed with
// 1,000 messages.
func BenchmarkRunAppend(b *testing.B) {
	srv, msgs := benchServer(b)
	h := srv.Handler()
	run, next := 0, 4096
	for b.Loop() {
		if next == 4096 {
			b.StopTimer()
			run++
			next = 1000
			serve(b, h, "/v1/runs/b"+strconv.Itoa(run)+"/decide", mustJSON(b, map[string]any{"offset": 0, "messages": toRaw(msgs[:1000])}))
			b.StartTimer()
		}
		serve(b, h, "/v1/runs/b"+strconv.Itoa(run)+"/decide", mustJSON(b, map[string]any{"offset": next, "messages": toRaw(msgs[next : next+1])}))
		next++
	}
}
