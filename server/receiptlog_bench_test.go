package server_test

import (
	"context"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/trust"
)

// BenchmarkLogReceipts measures what a receipt key adds to a logged
// decision, on the shipped refund example (examples/histories/refund.json,
// examples/policies, the support context: two of its five calls execute),
// the decision memoised as in serve: decide=only decides; decide+stamp
// signs the two receipts too (what BenchmarkDecideRefund/key=ed25519
// measures); decide+stamp+record also records them as the decision-log
// event does (recordSignatures: each receipt's jti and kid, and the JWKS).
// The difference of the last two is the log's share; record measures it
// alone, on one decision signed beforehand. Each reports the
// process's CPU time per decision (cpu-ns/op) beside the wall clock, which
// a shared machine makes noisy.
func BenchmarkLogReceipts(b *testing.B) {
	ctx := context.Background()
	reg, eng, req := receiptcases.Refund(b, "..")
	signer, err := trust.NewSigner(receiptcases.Key(1))
	if err != nil {
		b.Fatal(err)
	}
	s, err := newServer(withRegistry(reg), withReceipts(signer))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		stamp, record bool
	}{{"decide", false, false}, {"decide+stamp", true, false}, {"decide+stamp+record", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.PerOp(b)
			for b.Loop() {
				var opts []engine.DecideOption
				if tc.stamp {
					opts = append(opts, engine.WithReceipts(signer, ""))
				}
				d, err := eng.Decide(ctx, req, opts...)
				if err != nil {
					b.Fatal(err)
				}
				if tc.record {
					custom := map[string]any{}
					if err := s.RecordSignatures(custom, d); err != nil {
						b.Fatal(err)
					}
					if len(custom["receipts"].([]any)) != 2 {
						b.Fatal("want two receipts recorded")
					}
				}
			}
			cpu()
		})
	}
	// record alone, on one signed decision: the log's share measured
	// without the decision's noise around it.
	d, err := eng.Decide(ctx, req, engine.WithReceipts(signer, ""))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cputime.PerOp(b)
		for b.Loop() {
			if err := s.RecordSignatures(map[string]any{}, d); err != nil {
				b.Fatal(err)
			}
		}
		cpu()
	})
}
