package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// benchServer returns a server on the registry of a generated
// 1,000-message history, and the history's messages.
func benchServer(b *testing.B, opts ...option) (*server.Server, [][]byte) {
	o := gen.Default(1000 + 4096)
	reg, err := loader.ParseRegistry("gen", gen.Registry(7, o))
	require.NoError(b, err)
	srv, err := newServer(append([]option{withRegistry(reg)}, opts...)...)
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
// (in process, no network), with and without the schema check:
// prefix=off decodes every request whole (the prefix cache is off),
// prefix=growing sends
// each time the history so far, one message longer than the last (a
// stateless client's growing history; the prefix cache resumes after the
// previous request's messages). Building each body is not timed.
func BenchmarkDecideFullHistory(b *testing.B) {
	for _, check := range []struct {
		name string
		opts []option
	}{{"schema", []option{withSchema()}}, {"decoder_only", nil}} {
		for _, prefix := range []string{"off", "growing"} {
			b.Run(check.name+"/prefix="+prefix, func(b *testing.B) {
				opts := check.opts
				if prefix == "off" {
					opts = append(opts, withPrefixCache(0))
				}
				srv, msgs := benchServer(b, opts...)
				joined, ends := joinPrefixes(msgs)
				body := func(n int) []byte {
					return append(append([]byte(`{"history":`), joined[:ends[n-1]]...), "]}"...)
				}
				n := 1000
				first := body(n)
				b.SetBytes(int64(len(first)))
				serve(b, srv.Handler(), "/v1/decide", first)
				for b.Loop() {
					if prefix == "growing" {
						b.StopTimer()
						if n++; n > len(msgs) {
							n = 1000
						}
						first = body(n)
						b.StartTimer()
					}
					serve(b, srv.Handler(), "/v1/decide", first)
				}
			})
		}
	}
}

// joinPrefixes returns "[m0,m1,..." (no closing bracket) and, for each i,
// the length of that text holding messages 0..i.
func joinPrefixes(msgs [][]byte) ([]byte, []int) {
	joined := []byte{'['}
	ends := make([]int, len(msgs))
	for i, m := range msgs {
		if i > 0 {
			joined = append(joined, ',')
		}
		joined = append(joined, m...)
		ends[i] = len(joined)
	}
	return joined, ends
}

// BenchmarkRunAppend appends one message per request to runs primed with
// 1,000 messages.
func BenchmarkRunAppend(b *testing.B) {
	srv, msgs := benchServer(b)
	h := srv.Handler()
	run, next := 0, 4096
	var generation string // the run's, as its last answer gave it
	for b.Loop() {
		if next == 4096 {
			b.StopTimer()
			run++
			next = 1000
			first := mustJSON(b, toRaw(msgs[:1000]))
			serve(b, h, "/v1/runs/b"+strconv.Itoa(run)+"/decide", mustJSON(b, map[string]any{"offset": 0, "messages": json.RawMessage(first)}))
			generation = server.RunGeneration("", "b"+strconv.Itoa(run), nil, first)
			b.StartTimer()
		}
		appended := mustJSON(b, toRaw(msgs[next:next+1]))
		serve(b, h, "/v1/runs/b"+strconv.Itoa(run)+"/decide", mustJSON(b, map[string]any{"offset": next, "messages": json.RawMessage(appended), "generation": generation}))
		generation = server.RunGeneration(generation, "b"+strconv.Itoa(run), nil, appended)
		next++
	}
}
