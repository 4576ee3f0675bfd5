package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/server"
)

// BenchmarkCacheSavings measures what each of the server's caches saves
// (in process, no network): every workload runs with every cache on
// (off=none) and with one turned off (off=<name>, server.WithoutCache),
// so that benchstat -col /off compares them in one run (cpu-ns/op, the
// process's CPU time per request, is the steadier measure on a shared
// machine; a request's work on other goroutines counts). The workloads:
//
//   - growing (a growing history): POST /v1/decide with the history so
//     far, one message longer than the last, as a stateless client sends
//     it: conversations of 20 requests, from 1,000 messages to 1,019;
//   - never-seen (a history never seen): a different 1,000-message
//     history every time (windows of one generated conversation, each
//     starting one message later than the last);
//   - repeat-registry (a warm repeat): one 10-message history with the
//     registry in the request, sent again and again.
//
// Building each body is not timed. docs/caches.md quotes the ratios
// (internal/caches holds the table).
func BenchmarkCacheSavings(b *testing.B) {
	type workload struct {
		name string
		offs []string
		body func(i int) []byte
	}
	o := gen.Default(1000 + 4096)
	msgs := gen.Messages(7, o)
	joined, ends := joinPrefixes(msgs)
	regJSON := gen.Registry(7, o)
	short, shortEnds := joinPrefixes(msgs[:10])
	withRegistry := fmt.Appendf(nil, `{"registry":%s,"history":%s]}`, regJSON, short[:shortEnds[9]])
	workloads := []workload{
		{"growing", []string{"server.prefix", "server.prefix-admission", "server.bodies"}, func(i int) []byte {
			// Conversation c begins at message 1+7c (no two share a
			// beginning) and grows from 1,000 messages by one a request
			// for 20 requests.
			k, n := 1+7*(i/20%500), 1000+i%20
			return append(append([]byte(`{"history":[`), joined[ends[k-1]+1:ends[k+n-1]]...), "]}"...)
		}},
		{"never-seen", []string{"server.prefix", "server.prefix-admission", "server.bodies"}, func(i int) []byte {
			// Messages k to k+999: no two requests of a run begin with
			// the same message (4,095 of them, fewer than the
			// fingerprints the prefix cache notes).
			k := 1 + i%(len(msgs)-1001)
			return append(append([]byte(`{"history":[`), joined[ends[k-1]+1:ends[k+999]]...), "]}"...)
		}},
		{"repeat-registry", []string{"server.engines"}, func(int) []byte { return withRegistry }},
	}
	for _, w := range workloads {
		for _, off := range append([]string{"none"}, w.offs...) {
			b.Run(fmt.Sprintf("workload=%s/off=%s", w.name, off), func(b *testing.B) {
				var opts []option
				if off != "none" {
					opts = append(opts, server.WithoutCache(off))
				}
				srv, _ := benchServer(b, opts...)
				h := srv.Handler()
				serve(b, h, "/v1/decide", w.body(0))
				b.ReportAllocs()
				i := 1
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					body := w.body(i)
					i++
					b.StartTimer()
					c0, _ := cputime.Process()
					serve(b, h, "/v1/decide", body)
					c1, _ := cputime.Process()
					cpu += c1 - c0
				}
				if cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(i-1), "cpu-ns/op")
				}
			})
		}
	}
}
