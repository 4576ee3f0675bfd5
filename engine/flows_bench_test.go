package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
)

// flowRules are two operator rules that differ only in what they read:
// with flows=on the rule reads input.call.flows (so the engine builds
// them), with flows=off the call's tool alone.
var flowRules = map[bool]string{
	true: `package policycheck.rules.flows

deny contains "secret" if {
	some f in input.call.flows
	"secret" in f.source.labels
}
`,
	false: `package policycheck.rules.flows

deny contains "secret" if input.call.tool == "never_called"
`,
}

// BenchmarkFlows measures what flows cost (BENCHMARKS.md, "Data flows"):
// never-seen decides a generated 1,000-message history (100 tools)
// ending with a response from scratch, the facts and the flow index
// derived from the decoded history; step appends one tool return (a
// record of five strings and a number) and one response whose call
// copies a returned string into its arguments to a Run that already
// holds that history, and decides. flows=on with a rule reading
// input.call.flows, flows=off with one that does not, flows=tokens the
// first with token matching on (engine.FlowTokens); the memo off.
func BenchmarkFlows(b *testing.B) {
	ctx := context.Background()
	in := benchInputs(b, 1000, 100)
	h := in.h
	for len(h) > 0 && h[len(h)-1].Kind != facts.Response {
		h = h[:len(h)-1]
	}
	for _, mode := range []string{"off", "on", "tokens"} {
		on := mode != "off"
		e := newBenchEngine(b, in.reg, false, engine.DecisionCache(0),
			engine.Modules(engine.Source{File: "flows.rego", Text: flowRules[on]}), engine.FlowTokens(mode == "tokens"))
		if e.FactOptions().Flows != on || e.FactOptions().FlowTokens != (mode == "tokens") {
			b.Fatalf("flows=%v: the engine builds flows: %v", mode, e.FactOptions())
		}
		b.Run(fmt.Sprintf("never-seen/messages=%d/flows=%s", len(h), mode), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.Start()
			for b.Loop() {
				cpu.Tick()
				if _, err := e.Decide(ctx, engine.Request{History: h}); err != nil {
					b.Fatal(err)
				}
			}
			cpu.Report(b)
		})
		b.Run(fmt.Sprintf("step/messages=%d/flows=%s", len(h), mode), func(b *testing.B) {
			r := e.NewRun()
			if _, err := r.Step(ctx, h, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			cpu := cputime.Start()
			for b.Loop() {
				cpu.Tick()
				i++
				key := fmt.Sprintf("sk-live-%08d", i)
				ret := facts.Part{Kind: facts.ToolReturn, ToolName: "get_time", ToolCallID: fmt.Sprintf("p%d", i), HasToolCallID: true,
					Content: []byte(`{"id":"order_` + fmt.Sprint(i) + `","key":"` + key + `","status":"open","summary":"the latest invoice of the customer","updated_at":"2026-03-02T10:00:00Z","amount":12345.67}`)}
				call := facts.Part{Kind: facts.ToolCall, ToolName: "get_time", ToolCallID: fmt.Sprintf("c%d", i), HasToolCallID: true,
					Args: []byte(`{"note":"please use ` + key + ` for this","n":3}`)}
				sd, err := r.Step(ctx, []facts.Message{
					{Kind: facts.Request, Parts: []facts.Part{ret}},
					{Kind: facts.Response, Parts: []facts.Part{call}},
				}, nil)
				if err != nil || len(sd.Calls) != 1 {
					b.Fatal(err)
				}
			}
			cpu.Report(b)
		})
	}
}
