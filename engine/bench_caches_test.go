package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
)

// engineCaches are the engine's caches by their names in docs/caches.md.
var engineCaches = []string{"engine.filters", "engine.contexts", "engine.memo"}

// BenchmarkCacheSavings measures what each of the engine's caches saves:
// every workload runs with every cache on (off=none) and with one cache
// turned off (off=<name>, engine.WithoutCache), so that benchstat -col
// /off compares them in one run (cpu-ns/op, the process's CPU time per
// decision, is the steadier measure on a shared machine). The workloads, 100 tools and the
// benchmark filters:
//
//   - conversation (a growing history): the 1,000-message conversation of
//     BenchmarkConversation, one decision per message on the facts so
//     far, each pass under a new context as another user's would be;
//   - repeat (a warm repeat): one 100-message history's facts and context
//     decided again and again, as a retried or rebuilt request is;
//   - never-seen: the same facts under a new context every time, so that
//     no cache can answer: what a cache costs when it misses.
//
// docs/caches.md quotes the ratios (internal/caches holds the table).
func BenchmarkCacheSavings(b *testing.B) {
	ctx := context.Background()
	const tools = 100
	conv := benchInputs(b, 1000, tools)
	tr := facts.NewTracker(conv.reg)
	steps := make([]facts.Facts, len(conv.h))
	for i, m := range conv.h {
		tr.Append(m)
		steps[i] = tr.Facts()
	}
	one := benchInputs(b, 100, tools)
	oneFacts := facts.Derive(one.h, one.reg)
	workloads := []struct {
		name string
		reg  *facts.Registry
		req  func(i int) engine.Request
	}{
		{"conversation", conv.reg, func(i int) engine.Request {
			return engine.Request{Facts: &steps[i%len(steps)], Context: benchContext(true, i/len(steps))}
		}},
		{"repeat", one.reg, func(int) engine.Request {
			return engine.Request{Facts: &oneFacts, Context: benchContext(false, 0)}
		}},
		{"never-seen", one.reg, func(i int) engine.Request {
			return engine.Request{Facts: &oneFacts, Context: benchContext(true, i)}
		}},
	}
	for _, w := range workloads {
		for _, off := range append([]string{"none"}, engineCaches...) {
			b.Run(fmt.Sprintf("workload=%s/tools=%d/off=%s", w.name, tools, off), func(b *testing.B) {
				var opts []engine.Option
				if off != "none" {
					opts = append(opts, engine.WithoutCache(off))
				}
				e := newBenchEngine(b, w.reg, true, opts...)
				b.ReportAllocs()
				i := 0
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					d, err := e.Decide(ctx, w.req(i))
					i++
					if err != nil {
						b.Fatal(err)
					}
					if len(d.Errors) > 0 {
						b.Fatalf("decision failed closed: %v", d.Errors)
					}
				}
				cpu.Report(b)
			})
		}
	}
}
