package replay_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/output/replay"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
)

// benchRule is the candidate's change: one deny rule reading the call's
// arguments.
const benchRule = `package policycheck.rules.bench

deny contains {"reason": "r", "message": "m"} if {
	input.call.tool != "search_tools"
	object.get(input.call, ["args", "confirm"], false) == true
}
`

// BenchmarkReplay replays generated 1,000-message runs (internal/testkit/gen,
// seed 1, gen.Default) with the shipped policies as baseline and the
// shipped policies plus one deny rule as candidate. Each run has a
// context of its own, so neither side's filter cache nor decision memo
// holds another run's decisions: every run is a history never seen.
// Reported: runs/s and decisions/s (steps per second; both sides decide
// every step).
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	o := gen.Default(1000)
	reg, err := loader.ParseRegistry("bench.json", gen.Registry(1, o))
	if err != nil {
		b.Fatal(err)
	}
	h, err := loader.DecodeHistory("bench.json", gen.History(1, o), loader.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	const runs = 8
	for _, workers := range []int{1, 0} {
		name := fmt.Sprintf("workers=%d", workers)
		if workers == 0 {
			name = "workers=GOMAXPROCS"
		}
		b.Run(name, func(b *testing.B) {
			steps := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				base, err := engine.New(ctx, engine.Registry(reg))
				if err != nil {
					b.Fatal(err)
				}
				cand, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "bench.rego", Text: benchRule}))
				if err != nil {
					b.Fatal(err)
				}
				rs := make([]*replay.Run, runs)
				for j := range rs {
					rs[j] = &replay.Run{ID: fmt.Sprintf("run-%d", j), History: h, Context: map[string]any{"session": fmt.Sprintf("s%d-%d", i, j)}}
				}
				b.StartTimer()
				rep, err := replay.Replay(ctx, replay.Sides{Baseline: base, Candidate: cand}, rs, replay.Options{Workers: workers})
				if err != nil {
					b.Fatal(err)
				}
				steps += rep.Decisions
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(runs*b.N)/sec, "runs/s")
			b.ReportMetric(float64(steps)/sec, "decisions/s")
		})
	}
}
