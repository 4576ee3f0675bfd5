package engine_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

// exampleRegistry is a registry as an operator writes it (YAML).
const exampleRegistry = `
capabilities:
  - id: vault
    defer_loading: true
    description: Secrets runbook
tools:
  - name: get_time
  - name: search_docs
    defer_loading: true
  - name: read_secret
    capability: vault
  - name: delete_secret
    capability: vault
`

// exampleFilter is vault's permission gate: of its own tools it keeps
// read_secret only.
const exampleFilter = `package policycheck.capabilities.vault

import data.policycheck.lib

prepare_tools := lib.keep_own(input.tools, "vault", {"read_secret"})
`

// exampleHistory: the model loaded vault, then calls a kept tool, a
// filtered tool, a tool it never searched for, and a tool that does not
// exist.
const exampleHistory = `[
 {"kind": "request", "parts": [
   {"part_kind": "user-prompt", "content": "Read the API key, then clean up."}]},
 {"kind": "response", "provider_name": "anthropic", "parts": [
   {"part_kind": "tool-call", "tool_name": "load_capability", "args": {"id": "vault"},
    "tool_call_id": "l1", "tool_kind": "capability-load"}]},
 {"kind": "request", "parts": [
   {"part_kind": "tool-return", "tool_name": "load_capability", "content": {"instructions": "Never print secrets."},
    "tool_call_id": "l1", "tool_kind": "capability-load"},
   {"part_kind": "tool-availability-delta", "tools_added": ["read_secret"], "tool_call_id": "l1"}]},
 {"kind": "response", "provider_name": "anthropic", "parts": [
   {"part_kind": "tool-call", "tool_name": "read_secret", "args": {"name": "api_key"}, "tool_call_id": "c1"},
   {"part_kind": "tool-call", "tool_name": "delete_secret", "args": {"name": "api_key"}, "tool_call_id": "c2"},
   {"part_kind": "tool-call", "tool_name": "search_docs", "args": {"q": "rotation"}, "tool_call_id": "c3"},
   {"part_kind": "tool-call", "tool_name": "send_email", "args": {}, "tool_call_id": "c4"}]}
]`

func exampleEngine() *engine.Engine {
	reg, err := loader.ParseRegistry("tools.yaml", []byte(exampleRegistry))
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(context.Background(),
		engine.Registry(reg),
		engine.Modules(engine.Source{File: "vault.rego", Text: exampleFilter}),
	)
	if err != nil {
		log.Fatal(err)
	}
	return e
}

// exampleDecision is exampleEngine's decision on exampleHistory.
func exampleDecision() *engine.Decision {
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	d, err := exampleEngine().Decide(context.Background(), engine.Request{History: h})
	if err != nil {
		log.Fatal(err)
	}
	return d
}

func ExampleNew() {
	reg, err := loader.ParseRegistry("tools.yaml", []byte(exampleRegistry))
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(context.Background(),
		engine.Registry(reg),
		engine.Modules(engine.Source{File: "vault.rego", Text: exampleFilter}),
	)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range e.Modules() {
		fmt.Println(m)
	}

	// A filter that could not be cached safely is refused up front.
	_, err = engine.New(context.Background(),
		engine.Registry(reg),
		engine.Modules(engine.Source{File: "clock.rego", Text: `package policycheck.capabilities.vault

prepare_tools := {"read_secret"} if time.now_ns() > 0
`}),
	)
	fmt.Println(err)
	// Output:
	// policies/availability/availability.rego
	// policies/lib/calls.rego
	// policies/lib/flows.rego
	// policies/lib/gate.rego
	// policies/lib/integrity.rego
	// policies/lib/lib.rego
	// vault.rego
	// policy: clock.rego:3:37: nondeterministic_builtin: filter data.policycheck.capabilities.vault reaches the nondeterministic built-in time.now_ns: filter results are cached, so they must be a pure function of their input
}

func ExampleEngine_Decide() {
	e := exampleEngine()
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	d, err := e.Decide(context.Background(), engine.Request{History: h})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("available: ", d.Available)
	fmt.Println("advertised:", d.Advertised)
	for _, c := range d.Calls {
		fmt.Printf("%s %s: %s\n", *c.ToolCallID, c.Tool, c.Verdict)
		if c.Message != "" {
			fmt.Printf("  %s\n", c.Message)
		}
	}
	// Output:
	// available:  [get_time load_capability read_secret search_tools]
	// advertised: [get_time load_capability read_secret search_tools]
	// c1 read_secret: execute
	// c2 delete_secret: unknown_tool
	//   Unknown tool name: 'delete_secret'. Available tools: 'get_time', 'load_capability', 'read_secret', 'search_tools'
	// c3 search_docs: not_available_yet
	//   Tool 'search_docs' is not available yet: search for it first, then call it again once you've seen its schema.
	// c4 send_email: unknown_tool
	//   Unknown tool name: 'send_email'. Available tools: 'get_time', 'load_capability', 'read_secret', 'search_tools'
}

func ExampleEngine_Explain() {
	e := exampleEngine()
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	x, err := e.Explain(context.Background(), engine.Request{History: h})
	if err != nil {
		log.Fatal(err)
	}
	for _, tool := range x.Tools {
		fmt.Printf("%s available=%v\n", tool.Name, tool.Available)
		for _, why := range tool.Why {
			fmt.Println("  -", why)
		}
	}
	for _, c := range x.Calls {
		fmt.Printf("%s %s\n", c.Tool, c.Verdict)
		fmt.Println("  -", strings.Join(c.Why, "\n  - "))
	}
	// Output:
	// delete_secret available=false
	//   - owned by deferred capability "vault": callable once it is loaded (the load is the reveal)
	//   - loaded by the call at message 1, part 0 answered at message 2, part 0 (inside the window)
	//   - dropped by filter policycheck.capabilities.vault (vault.rego:5:1): neither advertised nor callable
	// get_time available=true
	//   - always-on: not deferred and no deferred owner
	// read_secret available=true
	//   - owned by deferred capability "vault": callable once it is loaded (the load is the reveal)
	//   - loaded by the call at message 1, part 0 answered at message 2, part 0 (inside the window)
	// search_docs available=false
	//   - search-gated: callable once revealed in the window
	//   - never revealed in this history
	// read_secret execute
	//   - decided by rule "gate" of policycheck.lib.gate.verdict (shipped policies/lib/gate.rego), through policycheck.availability.decision (shipped policies/availability/availability.rego)
	//   - "read_secret" is in the dispatch-available set
	// delete_secret unknown_tool
	//   - dropped by filter policycheck.capabilities.vault (vault.rego:5:1): a filtered tool is unknown
	//   - decided by rule "unknown_tool" of policycheck.lib.gate.verdict (shipped policies/lib/gate.rego), through policycheck.availability.decision (shipped policies/availability/availability.rego)
	// search_docs not_available_yet
	//   - "search_docs" is search-gated and was not revealed in the window the serving provider sees (from message 0, part 0)
	//   - decided by rule "gate" of policycheck.lib.gate.verdict (shipped policies/lib/gate.rego), through policycheck.availability.decision (shipped policies/availability/availability.rego)
	// send_email unknown_tool
	//   - "send_email" is neither a registry tool nor a framework tool present in this run
	//   - decided by rule "unknown_tool" of policycheck.lib.gate.verdict (shipped policies/lib/gate.rego), through policycheck.availability.decision (shipped policies/availability/availability.rego)
}

func ExampleDecision_Removed() {
	// The decision of ExampleEngine_Decide.
	d := exampleDecision()
	for _, tool := range []string{"delete_secret", "read_secret"} {
		fmt.Printf("%s: %q\n", tool, d.Removed(tool))
	}
	// Output:
	// delete_secret: ["dropped by filter policycheck.capabilities.vault (vault.rego:5:1): neither advertised nor callable"]
	// read_secret: []
}

func ExampleEngine_DecisionCacheStats() {
	e := exampleEngine()
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	// The same input twice, then under another context: the policy is
	// evaluated for the first and the third, and the second is answered
	// from the decision memo.
	for _, ctxDoc := range []any{nil, nil, map[string]any{"user": "ada"}} {
		d, err := e.Decide(context.Background(), engine.Request{History: h, Context: ctxDoc})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Calls[0].Tool, d.Calls[0].Verdict)
	}
	hits, misses, entries := e.DecisionCacheStats()
	fmt.Printf("hits=%d misses=%d entries=%d\n", hits, misses, entries)
	// Output:
	// read_secret execute
	// read_secret execute
	// read_secret execute
	// hits=1 misses=2 entries=2
}

// RegistryDocument is the registry as policies read it, in
// data.policycheck.registry: here the tools each capability owns, which
// lib.registry_keep_own reads, and those a load of a deferred capability
// reveals.
func ExampleRegistryDocument() {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(exampleRegistry))
	if err != nil {
		log.Fatal(err)
	}
	doc, err := engine.RegistryDocument(reg)
	if err != nil {
		log.Fatal(err)
	}
	m := doc.(map[string]any)
	for _, key := range []string{"names", "owned_tools", "capability_tools"} {
		b, _ := json.Marshal(m[key])
		fmt.Printf("%s: %s\n", key, b)
	}
	// Output:
	// names: ["delete_secret","get_time","read_secret","search_docs"]
	// owned_tools: {"vault":["delete_secret","read_secret"]}
	// capability_tools: {"vault":["delete_secret","read_secret"]}
}

// exampleApprovalRule asks a person before any read_secret runs, until an
// approval is bound to the call.
const exampleApprovalRule = `package policycheck.rules.secrets

require_approval contains {"reason": "secrets are read with a person's yes", "message": "Let the agent read this secret?"} if {
	input.call.tool == "read_secret"
	not input.call.approval.kind == "tool-approved"
}
`

// ExampleEngine_Decide_approvals: a call that needs a person's yes gets
// approval_required with its digest; the answer, passed back with that
// digest, applies to that call only.
func ExampleEngine_Decide_approvals() {
	reg, err := loader.ParseRegistry("tools.yaml", []byte(exampleRegistry))
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.Registry(reg), engine.Modules(
		engine.Source{File: "vault.rego", Text: exampleFilter},
		engine.Source{File: "secrets.rego", Text: exampleApprovalRule}))
	if err != nil {
		log.Fatal(err)
	}
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	d, err := e.Decide(context.Background(), engine.Request{History: h})
	if err != nil {
		log.Fatal(err)
	}
	asked := d.Calls[0]
	fmt.Println(asked.Tool, asked.Verdict, "-", asked.Message)

	// The person approves what they were shown.
	answer := facts.Approvals{"c1": {Kind: facts.ToolApproved, Digest: asked.Digest, Approvers: []string{"ana"}}}
	d, err = e.Decide(context.Background(), engine.Request{History: h, Approvals: answer})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Calls[0].Tool, d.Calls[0].Verdict, "-", d.Approvals[0].Why)
	// Output:
	// read_secret approval_required - Let the agent read this secret?
	// read_secret execute - applied: approved by ana; the call executes
}

// A decision that fails closed is not an error: Decide returns it with a
// nil error, every call denied, and the cause in Errors, as when a
// WithDeadline runs out under load. Check FailedClosed after every
// decision. Here an operator hide rule, which decides what is
// available, errs at run time. (An error in the rules about one call
// denies that call alone: docs/fail-closed.md.)
func ExampleDecision_FailedClosed() {
	reg, err := loader.ParseRegistry("tools.yaml", []byte(exampleRegistry))
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(context.Background(),
		engine.Registry(reg),
		engine.Modules(engine.Source{File: "broken.rego", Text: `package policycheck.rules.broken

hide contains name if {
	some c in input.dispatch.calls
	name := sprintf("%d", [to_number(c.tool)])
}
`}),
	)
	if err != nil {
		log.Fatal(err)
	}
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	d, err := e.Decide(context.Background(), engine.Request{History: h})
	if err != nil {
		log.Fatal(err) // only for input the engine cannot represent
	}
	if d.FailedClosed() {
		fmt.Println("failed closed:", d.Errors)
	}
	for _, c := range d.Calls {
		fmt.Printf("%s %s: %s\n", *c.ToolCallID, c.Tool, c.Verdict)
	}
	// Output:
	// failed closed: [policy evaluation failed: broken.rego:5: eval_builtin_error: to_number: strconv.ParseFloat: parsing "read_secret": invalid syntax]
	// c1 read_secret: denied
	// c2 delete_secret: denied
	// c3 search_docs: denied
	// c4 send_email: denied
}

// A run's step whose decision cannot be answered (here, the caller's
// signing fails) leaves the run as it was: StepWith's last word comes
// before the run records the step, so the same step can be sent again.
func ExampleRun_StepWith() {
	e := exampleEngine()
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	r := e.NewRun()
	if _, err := r.Step(ctx, h[:3], nil); err != nil {
		log.Fatal(err)
	}
	// The last word sees the final decision (receipts signed with
	// WithReceipts, step and retries set) before the run records it.
	audit := func(d *engine.Decision) error { return fmt.Errorf("audit %d calls: the sink is down", len(d.Calls)) }
	if _, err := r.StepWith(ctx, h[3:], nil, audit); err != nil {
		fmt.Println("refused:", err)
	}
	fmt.Println("messages:", r.Len(), "steps:", r.Steps())

	sd, err := r.StepWith(ctx, h[3:], nil, func(*engine.Decision) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("messages:", r.Len(), "steps:", r.Steps(), "c1:", sd.Calls[0].Verdict)
	// Output:
	// refused: audit 4 calls: the sink is down
	// messages: 3 steps: 0
	// messages: 4 steps: 1 c1: execute
}

func ExampleRun_Replay() {
	e := exampleEngine()
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// One process decides the step...
	first := e.NewRun()
	d, err := first.Step(ctx, h, nil)
	if err != nil {
		log.Fatal(err)
	}
	recorded := make([]engine.CallVerdict, len(d.Calls))
	for i, c := range d.Calls {
		recorded[i] = engine.CallVerdict{Tool: c.Tool, Part: c.Part, Verdict: c.Verdict, FailClosed: c.FailClosed}
	}
	// ...another resumes the session with its verdicts, evaluating nothing.
	second := e.NewRun()
	rd, err := second.Replay(h, recorded)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("steps:", second.Steps(), "send_email:", rd.Calls[3].Verdict, "charged:", rd.Retries[3].Charged)
	// Output:
	// steps: 1 send_email: unknown_tool charged: true
}

func ExampleWithReceipts() {
	signer, err := trust.NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		log.Fatal(err)
	}
	h, err := loader.DecodeHistory("run.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	// The receipts are signed as the decision is assembled: the decision
	// comes back final, and is never changed afterwards.
	d, err := exampleEngine().Decide(context.Background(), engine.Request{History: h}, engine.WithReceipts(signer, ""))
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range d.Calls {
		fmt.Println(c.Tool, c.Verdict, "receipt:", c.Receipt != "")
	}
	// The tool service checks the receipt before it runs the call.
	c := d.Calls[0]
	fmt.Println("verifies:", signer.VerifyReceipt(c.Receipt, "", c.ToolCallID, c.Tool, h[3].Parts[0].Args) == nil)
	// Output:
	// read_secret execute receipt: true
	// delete_secret unknown_tool receipt: false
	// search_docs not_available_yet receipt: false
	// send_email unknown_tool receipt: false
	// verifies: true
}
