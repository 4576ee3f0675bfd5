//go:build unix

package engine_test

import (
	"context"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/trust"
)

// BenchmarkDecideRefund decides the shipped refund example
// (examples/histories/refund.json with examples/policies and the support
// context: five calls, two of which execute) without a receipt key
// (key=none) and with one (key=ed25519: both executes signed), and
// reports the CPU time per decision beside the wall clock.
func BenchmarkDecideRefund(b *testing.B) {
	ctx := context.Background()
	_, eng, req := receiptcases.Refund(b, "..")
	signer, err := trust.NewSigner(receiptcases.Key(1))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		signer *trust.Signer
	}{{"key=none", nil}, {"key=ed25519", signer}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.PerOp(b)
			for b.Loop() {
				d, err := eng.Decide(ctx, req, engine.WithReceipts(tc.signer, ""))
				if err != nil {
					b.Fatal(err)
				}
				if tc.signer != nil {
					if d.Calls[0].Receipt == "" {
						b.Fatal("no receipt")
					}
				}
			}
			cpu()
		})
	}
}
