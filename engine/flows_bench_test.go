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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// flowsRegistry is the benchmark's registry with a parameters schema
// for stepTool, naming the arguments the steps send (an argument under a
// key no schema names is the model's choice, untrusted whatever its
// value), and with consequential every tool consequential, so that the
// stock library's rules judge every call.
func flowsRegistry(b testing.TB, in *benchInput, consequential bool) *facts.Registry {
	b.Helper()
	var v map[string]any
	if err := json.Unmarshal(in.registry, &v); err != nil {
		b.Fatal(err)
	}
	for _, t := range v["tools"].([]any) {
		tool := t.(map[string]any)
		if consequential {
			tool["consequential"] = true
		}
		if tool["name"] == stepTool {
			tool["parameters_json_schema"] = map[string]any{"type": "object", "properties": map[string]any{
				"note": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"},
				"to": map[string]any{"type": "string"}, "amount": map[string]any{"type": "number"},
			}}
		}
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
func withCopiedArgs(b testing.TB, h facts.History) facts.History {
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

// stepTool is the tool every step of BenchmarkFlows calls: the generated
// history's last call's, available, and consequential with the stock
// library.
const stepTool = "send_policy"

// stepWorkloads are BenchmarkFlows' incremental steps. Each answers the
// previous call (the history's last at first) with a return of an
// untrusted tool holding a key, and calls stepTool: step with the key in
// a longer argument string and a number the model wrote (the stock
// library asks approval, naming where each came from); step-user after
// a text response and a user turn asking to send to an address, with
// that address (a trusted action: the stock library lets it execute).
var stepWorkloads = []struct {
	name     string
	verdict  map[string]string
	messages func(prev facts.Part, i int) ([]facts.Message, facts.Part)
}{
	{"step", map[string]string{"off": "execute", "on": "execute", "tokens": "execute", "permitted": "execute", "stock": "approval_required"},
		func(prev facts.Part, i int) ([]facts.Message, facts.Part) {
			key := fmt.Sprintf("sk-live-%08d", i)
			call := facts.Part{Kind: facts.ToolCall, ToolName: stepTool, ToolCallID: fmt.Sprintf("c%d", i), HasToolCallID: true,
				Args: []byte(`{"note":"please use ` + key + ` for this","n":3}`)}
			return []facts.Message{
				{Kind: facts.Request, Parts: []facts.Part{stepReturn(prev, key, i)}},
				{Kind: facts.Response, Parts: []facts.Part{call}},
			}, call
		}},
	{"step-user", map[string]string{"off": "execute", "on": "execute", "tokens": "execute", "permitted": "execute", "stock": "execute"},
		func(prev facts.Part, i int) ([]facts.Message, facts.Part) {
			to := fmt.Sprintf("ops-%d@example.com", i)
			call := facts.Part{Kind: facts.ToolCall, ToolName: stepTool, ToolCallID: fmt.Sprintf("u%d", i), HasToolCallID: true,
				Args: []byte(`{"to":"` + to + `"}`)}
			return []facts.Message{
				{Kind: facts.Request, Parts: []facts.Part{stepReturn(prev, fmt.Sprintf("sk-live-%08d", i), i)}},
				{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.Text, Content: []byte(`"Done."`)}}},
				{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"Now send the latest summary to ` + to + `, please."`)}}},
				{Kind: facts.Response, Parts: []facts.Part{call}},
			}, call
		}},
}

// stepReturn is the return answering call: a record holding key.
func stepReturn(call facts.Part, key string, i int) facts.Part {
	return facts.Part{Kind: facts.ToolReturn, ToolName: call.ToolName, ToolCallID: call.ToolCallID, HasToolCallID: true,
		Content: []byte(`{"id":"order_` + fmt.Sprint(i) + `","key":"` + key + `","status":"open","summary":"the latest invoice of the customer","updated_at":"2026-03-02T10:00:00Z","amount":12345.67}`)}
}

// flowModes are BenchmarkFlows' rule sets, in the order it runs them.
var flowModes = []string{"off", "on", "tokens", "permitted", "stock"}

// flowsBench is what BenchmarkFlows and TestFlowsBenchmarkJudges share:
// the generated history ending with a response (its last call is to
// stepTool), the same with copied arguments, and an engine per mode.
type flowsBench struct {
	h, hArgs facts.History
	lastCall facts.Part
	engines  map[string]*engine.Engine
}

// toLastResponse is h up to its last response, capped so that a Run's
// appends never reach the shared history.
func toLastResponse(h facts.History) facts.History {
	for len(h) > 0 && h[len(h)-1].Kind != facts.Response {
		h = h[:len(h)-1]
	}
	return h[:len(h):len(h)]
}

func newFlowsBench(tb testing.TB) *flowsBench {
	tb.Helper()
	in := benchInputs(tb, 1000, 100)
	h := toLastResponse(in.h)
	fb := &flowsBench{h: h, hArgs: withCopiedArgs(tb, h), lastCall: h[len(h)-1].Parts[len(h[len(h)-1].Parts)-1],
		engines: map[string]*engine.Engine{}}
	if fb.lastCall.Kind != facts.ToolCall || fb.lastCall.ToolName != stepTool {
		tb.Fatalf("the history ends with %v %q, not a call to %s", fb.lastCall.Kind, fb.lastCall.ToolName, stepTool)
	}
	for _, mode := range flowModes {
		on, tokens := mode != "off", mode == "tokens" || mode == "stock" || mode == "permitted"
		rules, reg := flowRules[mode], flowsRegistry(tb, in, mode == "stock" || mode == "permitted")
		if mode == "tokens" {
			rules = flowRules["on"]
		}
		e := newBenchEngine(tb, reg, false, engine.DecisionCache(0),
			engine.Modules(engine.Source{File: "flows.rego", Text: rules}), engine.FlowTokens(tokens))
		if e.FactOptions().Flows != on || e.FactOptions().FlowTokens != tokens {
			tb.Fatalf("flows=%v: the engine builds flows: %v", mode, e.FactOptions())
		}
		fb.engines[mode] = e
	}
	return fb
}

// BenchmarkFlows measures what flows cost (BENCHMARKS.md, "Data flows"):
// never-seen decides a generated 1,000-message history (100 tools)
// ending with a response from scratch, the facts and the flow index
// derived from the decoded history (its last call's arguments are {});
// never-seen-args the same history whose last call copies part of a
// returned string, an email and an amount (withCopiedArgs); step and
// step-user (stepWorkloads) append, to a Run that already holds that
// history, the return of the previous call and a call to stepTool, and
// decide: every step's call is one the registry has and the policies
// judge, with the verdict each mode must give checked. flows=on with a
// rule reading input.call.flows, flows=off with one that does not,
// flows=tokens the first with token matching on (engine.FlowTokens),
// flows=stock and flows=permitted the stock library's rules (flowRules)
// with token matching on and every tool consequential; the memo off.
func BenchmarkFlows(b *testing.B) {
	ctx := context.Background()
	fb := newFlowsBench(b)
	h, hArgs := fb.h, fb.hArgs
	for _, mode := range flowModes {
		e := fb.engines[mode]
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
		for _, st := range stepWorkloads {
			b.Run(fmt.Sprintf("%s/messages=%d/flows=%s", st.name, len(h), mode), func(b *testing.B) {
				r := e.NewRun()
				if _, err := r.Step(ctx, h, nil); err != nil {
					b.Fatal(err)
				}
				prev := fb.lastCall
				b.ReportAllocs()
				i := 0
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					i++
					msgs, call := st.messages(prev, i)
					sd, err := r.Step(ctx, msgs, nil)
					if err != nil || len(sd.Calls) != 1 || sd.Calls[0].Verdict != st.verdict[mode] {
						b.Fatalf("%v %+v", err, sd.Calls)
					}
					prev = call
				}
				cpu.Report(b)
			})
		}
	}
}

// TestFlowsBenchmarkJudges keeps BenchmarkFlows measuring what it says:
// in every mode each workload's call is one the policies judge (never
// unknown_tool or not_available_yet), with the verdict the benchmark's
// figures are read against (BENCHMARKS.md, "Data flows": the stock
// library lets the never-seen call and step-user execute, and asks
// approval for the copied arguments and step).
func TestFlowsBenchmarkJudges(t *testing.T) {
	ctx := context.Background()
	fb := newFlowsBench(t)
	neverSeen := map[string]map[string]string{
		"never-seen":      {"off": "execute", "on": "execute", "tokens": "execute", "permitted": "execute", "stock": "execute"},
		"never-seen-args": {"off": "execute", "on": "execute", "tokens": "execute", "permitted": "execute", "stock": "approval_required"},
	}
	for _, mode := range flowModes {
		e := fb.engines[mode]
		for name, h := range map[string]facts.History{"never-seen": fb.h, "never-seen-args": fb.hArgs} {
			d, err := e.Decide(ctx, engine.Request{History: h})
			require.NoError(t, err)
			require.Len(t, d.Calls, 1)
			assert.Equal(t, neverSeen[name][mode], d.Calls[0].Verdict, "%s flows=%s: %v", name, mode, d.Calls[0].Reasons)
		}
		for _, st := range stepWorkloads {
			r := e.NewRun()
			_, err := r.Step(ctx, fb.h, nil)
			require.NoError(t, err)
			prev := fb.lastCall
			for i := 1; i <= 3; i++ {
				msgs, call := st.messages(prev, i)
				sd, err := r.Step(ctx, msgs, nil)
				require.NoError(t, err)
				require.Len(t, sd.Calls, 1)
				assert.Equal(t, st.verdict[mode], sd.Calls[0].Verdict, "%s flows=%s step %d: %v", st.name, mode, i, sd.Calls[0].Reasons)
				prev = call
			}
		}
	}
}

// BenchmarkFlowsEchoLookup measures a step whose call copies a value
// from the return just appended, at 1,000 and 10,000 messages: as a
// whole (exact: the flow is trusting, so the engine looks for the value
// among everything the agent sent before, facts.Flow.EchoOfTheAgent) or
// inside a longer string (contains: no look-up). The look-up starts at
// the first call that may hold the value, so a step costs the same
// whatever the session's length (BENCHMARKS.md, "Data flows"). One
// untimed step first, so that the session's calls are read before the
// timed ones (a session reads each call once).
func BenchmarkFlowsEchoLookup(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		in := benchInputs(b, n, 100)
		h := toLastResponse(in.h)
		e := newBenchEngine(b, flowsRegistry(b, in, false), false, engine.DecisionCache(0),
			engine.Modules(engine.Source{File: "flows.rego", Text: flowRules["on"]}))
		for _, exact := range []bool{false, true} {
			name := map[bool]string{false: "contains", true: "exact"}[exact]
			b.Run(fmt.Sprintf("messages=%d/copy=%s", n, name), func(b *testing.B) {
				r := e.NewRun()
				if _, err := r.Step(ctx, h, nil); err != nil {
					b.Fatal(err)
				}
				prev := h[len(h)-1].Parts[len(h[len(h)-1].Parts)-1]
				i := 0
				step := func() {
					i++
					key := fmt.Sprintf("sk-live-%08d", i)
					args := `{"note":"please use ` + key + ` for this"}`
					if exact {
						args = `{"note":"` + key + `"}`
					}
					call := facts.Part{Kind: facts.ToolCall, ToolName: stepTool, ToolCallID: fmt.Sprintf("c%d", i), HasToolCallID: true, Args: []byte(args)}
					sd, err := r.Step(ctx, []facts.Message{{Kind: facts.Request, Parts: []facts.Part{stepReturn(prev, key, i)}},
						{Kind: facts.Response, Parts: []facts.Part{call}}}, nil)
					if err != nil || len(sd.Calls) != 1 || sd.Calls[0].Verdict != engine.Execute {
						b.Fatalf("%v %+v", err, sd.Calls)
					}
					prev = call
				}
				step()
				b.ReportAllocs()
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					step()
				}
				cpu.Report(b)
			})
		}
	}
}
