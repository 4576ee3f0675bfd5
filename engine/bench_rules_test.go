package engine_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/loader"
)

// callRulesRegistry: ten always-on tools.
const callRulesRegistry = `tools:
  - name: transfer_funds
  - name: t1
  - name: t2
  - name: t3
  - name: t4
  - name: t5
  - name: t6
  - name: t7
  - name: t8
  - name: t9
`

// benchCallRules measures the judging of a response of eight calls (five
// transfers of increasing amounts and three other tools), the decision
// memo off so every iteration evaluates the policy, under the operator
// rules named by rules: "none" (the shipped policy alone) or "deny"
// (testdata/rules/payments.rego, which denies transfers above 1000).
// Extra modules are added to the policy set.
func benchCallRules(b *testing.B, rules string, extra []engine.Source, approvals func(*engine.Decision) engine.Request) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("tools.yaml", []byte(callRulesRegistry))
	if err != nil {
		b.Fatal(err)
	}
	mods := append([]engine.Source(nil), extra...)
	if rules == "deny" {
		src, err := os.ReadFile("testdata/rules/payments.rego")
		if err != nil {
			b.Fatal(err)
		}
		mods = append(mods, engine.Source{File: "testdata/rules/payments.rego", Text: string(src)})
	}
	e, err := engine.New(ctx, engine.Registry(reg), engine.Modules(mods...), engine.DecisionCache(0))
	if err != nil {
		b.Fatal(err)
	}
	var calls []string
	for i := range 5 {
		calls = append(calls, wCall("transfer_funds", fmt.Sprintf("c%d", i), fmt.Sprintf(`{"amount": %d}`, 300*(i+1))))
	}
	for i := range 3 {
		calls = append(calls, wCall(fmt.Sprintf("t%d", i+1), fmt.Sprintf("o%d", i), `{}`))
	}
	h := mustHistory(b, wReq(wUser("pay")), wResp("anthropic", calls...))
	req := engine.Request{History: h}
	d, err := e.Decide(ctx, req)
	if err != nil || len(d.Errors) > 0 || len(d.Calls) != 8 {
		b.Fatalf("decision: %v %v", err, d)
	}
	if approvals != nil {
		req = approvals(d)
		req.History = h
	}
	decideLoop(b, ctx, e, req)
}

// BenchmarkDecideCallRules: eight calls judged with no operator rule and
// with a deny rule package; the A/B baseline for require_approval's cost
// on decisions without approval rules.
func BenchmarkDecideCallRules(b *testing.B) {
	for _, rules := range []string{"none", "deny"} {
		b.Run("rules="+rules, func(b *testing.B) { benchCallRules(b, rules, nil, nil) })
	}
}

// decideLoop times e deciding req, CPU time reported beside wall time:
// the measured loop of the eight-call benchmarks.
func decideLoop(b *testing.B, ctx context.Context, e *engine.Engine, req engine.Request) {
	b.ReportAllocs()
	cpu := cputime.Start()
	for b.Loop() {
		cpu.Tick()
		if _, err := e.Decide(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	cpu.Report(b)
}
