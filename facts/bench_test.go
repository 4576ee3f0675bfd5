package facts_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
)

// benchInput is a generated registry and history of n messages, plus the
// trackerPool messages that follow them in the same generated run, built
// once per process.
type benchInput struct {
	data []byte // the history's JSON
	h    facts.History
	pool []facts.Message // the messages after h, for BenchmarkTrackerAppend
	reg  *facts.Registry
}

const trackerPool = 512

var benchInputs = func() func(b *testing.B, n int) *benchInput {
	var mu sync.Mutex
	cache := map[int]*benchInput{}
	return func(b *testing.B, n int) *benchInput {
		b.Helper()
		mu.Lock()
		defer mu.Unlock()
		if in, ok := cache[n]; ok {
			return in
		}
		o := gen.Default(n + trackerPool)
		reg, err := loader.ParseRegistry("bench.json", gen.Registry(1, o))
		if err != nil {
			b.Fatal(err)
		}
		// A shorter generated history is a prefix of a longer one.
		msgs := gen.Messages(1, o)
		join := func(ms [][]byte) []byte {
			return append(append([]byte("["), bytes.Join(ms, []byte(","))...), ']')
		}
		in := &benchInput{data: join(msgs[:n]), reg: reg}
		if in.h, err = loader.DecodeHistory("bench.json", in.data, benchLimits()); err != nil {
			b.Fatal(err)
		}
		if in.pool, err = loader.DecodeMessages("pool.json", join(msgs[n:]), n, benchLimits()); err != nil {
			b.Fatal(err)
		}
		cache[n] = in
		return in
	}
}()

func benchLimits() loader.Limits {
	lim := loader.DefaultLimits()
	lim.MaxBytes = 1 << 30
	lim.MaxMessages = 1 << 20
	lim.MaxParts = 1 << 24
	return lim
}

var benchSizes = []int{100, 10_000, 100_000}

// BenchmarkDerive measures Derive on a decoded history; MB/s counts the
// history's JSON bytes, to compare with BenchmarkBytesToFacts.
func BenchmarkDerive(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			in := benchInputs(b, n)
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				_ = facts.Derive(in.h, in.reg)
			}
		})
	}
}

// BenchmarkDeriveFlows measures what indexing the returns' contents for
// input.call.flows adds to Derive (BENCHMARKS.md, "Data flows"): a
// generated 1,000-message history derived with flows on and off.
func BenchmarkDeriveFlows(b *testing.B) {
	in := benchInputs(b, 1000)
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("messages=1000/flows=%v", on), func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			cpu := cputime.Start()
			for b.Loop() {
				cpu.Tick()
				_ = facts.Derive(in.h, in.reg, facts.Options{Flows: on})
			}
			cpu.Report(b)
		})
	}
}

// BenchmarkBytesToFacts measures decoding plus Derive: what a stateless
// evaluation of a whole history costs before any policy runs.
func BenchmarkBytesToFacts(b *testing.B) {
	lim := benchLimits()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			in := benchInputs(b, n)
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				h, err := loader.DecodeHistory("bench.json", in.data, lim)
				if err != nil {
					b.Fatal(err)
				}
				_ = facts.Derive(h, in.reg)
			}
		})
	}
}

// BenchmarkTrackerAppend measures appending one message (requests and
// responses alternately) to a tracker that already holds n messages, then
// reading its facts. The cost must not depend on n.
func BenchmarkTrackerAppend(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			in := benchInputs(b, n)
			var reqs, resps []facts.Message
			for _, m := range in.pool {
				if m.Kind == facts.Request {
					reqs = append(reqs, m)
				} else {
					resps = append(resps, m)
				}
			}
			tr := facts.NewTracker(in.reg)
			tr.Append(in.h...)
			lastResponse := in.h[n-1].Kind == facts.Response
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if lastResponse {
					tr.Append(reqs[i%len(reqs)])
				} else {
					tr.Append(resps[i%len(resps)])
				}
				lastResponse = !lastResponse
				i++
				_ = tr.Facts()
			}
		})
	}
}
