package engine

import (
	"context"
	"os"
	"testing"

	"github.com/policycheck/policycheck/loader"
)

// BenchmarkDecisionParts measures what a verdict-only evaluation could
// save a call (issue 45 item 9, the gateway's p99; BENCHMARKS.md "The MCP
// gateway"): the whole decision query against its parts the per-call
// path evaluates apart (perCall: the rest, availability and
// advertisement, and one call's gate.verdict), on the shipped policies
// and a history whose response makes one call. A design that reuses the
// rest while availability is unchanged would still evaluate the verdict.
func BenchmarkDecisionParts(b *testing.B) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("../examples/histories/refund-after-lookup.json")
	if err != nil {
		b.Fatal(err)
	}
	h, err := loader.DecodeHistory("refund-after-lookup", raw, loader.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(ctx, Registry(reg), DecisionCache(0))
	if err != nil {
		b.Fatal(err)
	}
	s := e.snap.Load()
	p, err := s.prepare(ctx, Request{History: h}, &decideConfig{})
	if err != nil {
		b.Fatal(err)
	}
	if s.perCall == nil {
		b.Fatal("no per-call queries")
	}
	vq, err := s.perCall.verdictQuery(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.decision.Eval(ctx, s.evalWith(p.input)...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rest", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.perCall.rest.Eval(ctx, s.evalWith(p.input)...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verdict0", func(b *testing.B) {
		for b.Loop() {
			if _, err := vq.Eval(ctx, s.evalWith(p.input)...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
