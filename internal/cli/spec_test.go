package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/spectable"
)

// TestSpecTablesThroughEval runs every case of the rule-by-rule fact
// tables (facts/testdata/spec) through `policycheck eval`: the window,
// facts and dispatch facts it prints must be the ones the table states,
// which facts' TestSpecTables checks Derive and the Tracker against.
func TestSpecTablesThroughEval(t *testing.T) {
	cases, err := spectable.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.Title(), func(t *testing.T) {
			hist := writeFile(t, dir, fmt.Sprintf("history-%d.json", i), string(c.History))
			res := run(t, "", "eval", "--registry", spectable.RegistryFile(), "--history", hist)
			if res.code != 0 {
				t.Fatalf("eval exited %d: %s", res.code, res.stderr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
				t.Fatalf("eval printed no JSON: %v\n%s", err, res.stdout)
			}
			if errs, ok := got["errors"]; ok {
				t.Fatalf("the decision failed closed: %v", errs)
			}
			want, err := spectable.Normalize(c.Want)
			if err != nil {
				t.Fatal(err)
			}
			spectable.DropFactsOnly(want)
			if diff := spectable.Mismatches(want, got); len(diff) > 0 {
				t.Errorf("eval disagrees with %s (%s):\n%s", c.Rule, c.Name, strings.Join(diff, "\n"))
			}
		})
	}
}

// TestNumberExtensionsReachPoliciesAsStrings: a history whose tool
// arguments hold Infinity (which the reference's parser accepts) is
// decided, not rejected, and the call is refused: the arguments hold the
// string "Infinity", not a number, so they fail the example registry's
// schema for transfer_funds (invalid_args) before the transfers rules.
func TestNumberExtensionsReachPoliciesAsStrings(t *testing.T) {
	dir := t.TempDir()
	hist := writeFile(t, dir, "h.json", `[
 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "move everything"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "transfer_funds", "tool_call_id": "t1",
   "args": {"from": "ops", "to": "savings", "amount": Infinity}}]}
]`)
	res := run(t, "", "eval", "--registry", "../../examples/registry.yaml", "--history", hist,
		"--policy", "../../examples/policies/transfers")
	if res.code != 0 {
		t.Fatalf("eval exited %d: %s", res.code, res.stderr)
	}
	var d struct {
		Calls []struct {
			Verdict string `json:"verdict"`
			Message string `json:"message"`
		} `json:"calls"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Calls) != 1 || d.Calls[0].Verdict != "invalid_args" || !strings.Contains(d.Calls[0].Message, "/amount: got string, want number") {
		t.Fatalf("want the transfer refused for a non-numeric amount, got %+v", d.Calls)
	}
}
