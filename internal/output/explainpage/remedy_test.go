package explainpage

import (
	"testing"

	"github.com/policycheck/policycheck/engine"
)

// Every verdict a call can get has its own "what would have made it
// callable" line; a verdict added to the engine without one would fall
// through to the approval text, which would mislead.
func TestRemedyNamesEachRefusal(t *testing.T) {
	seen := map[string]string{}
	for _, v := range []string{engine.UnknownTool, engine.NotAvailableYet, engine.Denied, engine.InvalidArgs, engine.ApprovalRequired} {
		got := remedy(engine.CallExplained{CallVerdict: engine.CallVerdict{Verdict: v}}, nil)
		if got == "" {
			t.Errorf("%s: no remedy", v)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s share the remedy %q", v, other, got)
		}
		seen[got] = v
	}
	if got := remedy(engine.CallExplained{CallVerdict: engine.CallVerdict{Verdict: engine.Execute}}, nil); got != "" {
		t.Errorf("execute: remedy %q, want none", got)
	}
}
