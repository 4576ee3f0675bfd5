package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

// argsBenchSchema is the transfer schema of examples/registry.yaml.
const argsBenchSchema = `
    parameters_json_schema:
      type: object
      properties:
        from: {type: string, minLength: 1}
        to: {type: string, minLength: 1}
        amount: {type: number}
      required: [from, to, amount]
      additionalProperties: false`

// benchArgs is the "eight calls" workload of BenchmarkDecideCallRules
// (five transfer_funds calls and three other tools, the shipped policy
// alone, the decision memo off so every iteration evaluates the policy),
// with every tool given the transfer schema when schemas is "on" and none
// when it is "none"; args is "valid" (every call validates) or "invalid"
// (the transfers lack from and to: invalid_args).
func benchArgs(b *testing.B, schemas, args string) {
	ctx := context.Background()
	var reg strings.Builder
	reg.WriteString("tools:\n")
	for _, name := range []string{"transfer_funds", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"} {
		reg.WriteString("  - name: " + name)
		if schemas == "on" {
			reg.WriteString(argsBenchSchema)
		}
		reg.WriteString("\n")
	}
	r, err := loader.ParseRegistry("tools.yaml", []byte(reg.String()))
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(ctx, engine.Registry(r), engine.DecisionCache(0))
	if err != nil {
		b.Fatal(err)
	}
	var calls []string
	for i := range 5 {
		a := fmt.Sprintf(`{"from": "ops", "to": "savings", "amount": %d}`, 300*(i+1))
		if args == "invalid" {
			a = fmt.Sprintf(`{"amount": %d}`, 300*(i+1))
		}
		calls = append(calls, wCall("transfer_funds", fmt.Sprintf("c%d", i), a))
	}
	for i := range 3 {
		calls = append(calls, wCall(fmt.Sprintf("t%d", i+1), fmt.Sprintf("o%d", i), `{"from": "a", "to": "b", "amount": 1}`))
	}
	h := mustHistory(b, wReq(wUser("pay")), wResp("anthropic", calls...))
	req := engine.Request{History: h}
	d, err := e.Decide(ctx, req)
	if err != nil || len(d.Errors) > 0 || len(d.Calls) != 8 {
		b.Fatalf("decision: %v %v", err, d)
	}
	want := engine.Execute
	if schemas == "on" && args == "invalid" {
		want = engine.InvalidArgs
	}
	if d.Calls[0].Verdict != want {
		b.Fatalf("verdict %s, want %s", d.Calls[0].Verdict, want)
	}
	decideLoop(b, ctx, e, req)
}

// BenchmarkDecideArgsValidation: the cost of validating arguments against
// parameters_json_schema, on the eight-call workload: a registry without
// schemas (the baseline), one where every call's tool has one and every
// call validates, and one where the five transfers fail theirs.
// BENCHMARKS.md, "Argument validation", divides the difference by the
// eight calls.
func BenchmarkDecideArgsValidation(b *testing.B) {
	for _, c := range []struct{ schemas, args string }{{"none", "valid"}, {"on", "valid"}, {"on", "invalid"}} {
		b.Run("schemas="+c.schemas+"/args="+c.args, func(b *testing.B) { benchArgs(b, c.schemas, c.args) })
	}
}
