package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/loader"
)

// flowRules are the operator rules of each mode of BenchmarkFlows: with
// flows=on and flows=tokens the rule reads input.call.flows (so the
// engine builds them), with flows=off the call's tool alone, with
// flows=stock the stock library of policies/lib/integrity.rego
// (lib.permitted_flow, lib.trusted_action and their reasons, as
// examples/policies/integrity uses them), flows=permitted its
// lib.permitted_flow alone (no lib.trusted_action, so no
// input.call.window).
var flowRules = map[string]string{
	"on": `package policycheck.rules.flows

deny contains "secret" if {
	some f in input.call.flows
	"secret" in f.source.labels
}
`,
	"off": `package policycheck.rules.flows

deny contains "secret" if input.call.tool == "never_called"
`,
	"permitted": `package policycheck.rules.flows

import data.policycheck.lib

deny contains reason if {
	not lib.permitted_flow(input.call)
	some reason in lib.flow_violation_reasons(input.call)
}
`,
	"stock": `package policycheck.rules.flows

import data.policycheck.lib

deny contains reason if {
	not lib.permitted_flow(input.call)
	some reason in lib.flow_violation_reasons(input.call)
}

require_approval contains reason if {
	not lib.trusted_action(input.call)
	some r in lib.untrusted_action_reasons(input.call)
	reason := {"reason": r}
}

require_approval contains {"reason": "the flows cannot be relied on"} if {
	lib.consequential(input.call.tool)
	not lib.flows_complete(input.call)
}
`,
}

// consequentialRegistry is the benchmark's registry with every tool
// consequential, so that the stock library's rules judge every call.
func consequentialRegistry(b *testing.B, in *benchInput) *facts.Registry {
	b.Helper()
	var v map[string]any
	if err := json.Unmarshal(in.registry, &v); err != nil {
		b.Fatal(err)
	}
	for _, t := range v["tools"].([]any) {
		t.(map[string]any)["consequential"] = true
	}
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	reg, err := loader.ParseRegistry("bench.json", raw)
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

// withCopiedArgs returns h with its last response's calls replaced by
// one call whose arguments copy part of a string returned midway (inside
// a longer string), an email and a five-digit amount: the flows of a
// never-seen decision then have leaves to look up.
func withCopiedArgs(b *testing.B, h facts.History) facts.History {
	b.Helper()
	var copied string
	for m := len(h) / 2; m < len(h) && copied == ""; m++ {
		for _, p := range h[m].Parts {
			var s string
			if p.Kind == facts.ToolReturn && json.Unmarshal(p.Content, &s) == nil && len(s) >= 40 {
				copied = s[:40]
				break
			}
		}
	}
	if copied == "" {
		b.Fatal("no returned string to copy")
	}
	args, err := json.Marshal(map[string]any{"note": "please forward " + copied + " to the team",
		"to": "ada.lovelace@example.com", "amount": json.Number("12345.67")})
	if err != nil {
		b.Fatal(err)
	}
	last := h[len(h)-1]
	last.Parts = []facts.Part{{Kind: facts.ToolCall, ToolName: "send_policy", ToolCallID: "copy", HasToolCallID: true, Args: args}}
	return append(h[:len(h)-1:len(h)-1], last)
}

// BenchmarkFlows measures what flows cost (BENCHMARKS.md, "Data flows"):
// never-seen decides a generated 1,000-message history (100 tools)
// ending with a response from scratch, the facts and the flow index
// derived from the decoded history (its last call's arguments are {});
// never-seen-args the same history whose last call copies part of a
// returned string, an email and an amount (withCopiedArgs); step appends
// one tool return (a record of five strings and a number) and one
// response whose call copies a returned string into its arguments to a
// Run that already holds that history, and decides. flows=on with a rule
// reading input.call.flows, flows=off with one that does not,
// flows=tokens the first with token matching on (engine.FlowTokens),
// flows=stock and flows=permitted the stock library's rules (flowRules)
// with token matching on and every tool consequential; the memo off.
func BenchmarkFlows(b *testing.B) {
	ctx := context.Background()
	in := benchInputs(b, 1000, 100)
	h := in.h
	for len(h) > 0 && h[len(h)-1].Kind != facts.Response {
		h = h[:len(h)-1]
	}
	hArgs := withCopiedArgs(b, h)
	for _, mode := range []string{"off", "on", "tokens", "permitted", "stock"} {
		on, tokens := mode != "off", mode == "tokens" || mode == "stock" || mode == "permitted"
		rules, reg := flowRules[mode], in.reg
		if mode == "tokens" {
			rules = flowRules["on"]
		}
		if mode == "stock" || mode == "permitted" {
			reg = consequentialRegistry(b, in)
		}
		e := newBenchEngine(b, reg, false, engine.DecisionCache(0),
			engine.Modules(engine.Source{File: "flows.rego", Text: rules}), engine.FlowTokens(tokens))
		if e.FactOptions().Flows != on || e.FactOptions().FlowTokens != tokens {
			b.Fatalf("flows=%v: the engine builds flows: %v", mode, e.FactOptions())
		}
		for _, hist := range []struct {
			name string
			h    facts.History
		}{{"never-seen", h}, {"never-seen-args", hArgs}} {
			b.Run(fmt.Sprintf("%s/messages=%d/flows=%s", hist.name, len(h), mode), func(b *testing.B) {
				b.ReportAllocs()
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					if _, err := e.Decide(ctx, engine.Request{History: hist.h}); err != nil {
						b.Fatal(err)
					}
				}
				cpu.Report(b)
			})
		}
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
