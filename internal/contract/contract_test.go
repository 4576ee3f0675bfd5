package contract_test

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/internal/contract"
)

func compile(t *testing.T, src string) *ast.Compiler {
	t.Helper()
	m, err := ast.ParseModuleWithOpts("op.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	c := ast.NewCompiler().WithStrict(true).WithUseTypeCheckAnnotations(true)
	c.Compile(map[string]*ast.Module{"op.rego": m})
	if c.Failed() {
		t.Fatalf("compile: %v", c.Errors)
	}
	return c
}

// TestShapes: each accepted shape passes; each refused one is refused at
// its row, with the right form in the message.
func TestShapes(t *testing.T) {
	const rules = "package policycheck.rules.x\n\n"
	const filter = "package policycheck.capabilities.vault\n\n"
	cases := []struct {
		name, src string
		row       int // 0: accepted
		want      string
	}{
		{"deny object", rules + `deny contains {"reason": "r", "message": "m"} if input.call.tool == "a"`, 0, ""},
		{"deny string (Conftest)", rules + `deny contains msg if { input.call.tool == "a"; msg := "no" }`, 0, ""},
		{"deny if", rules + `deny if input.call.tool == "a"`, 0, ""},
		{"deny := true", rules + `deny := true`, 0, ""},
		{"default deny false", rules + "default deny := false\n\ndeny := true if input.call.tool == \"a\"", 0, ""},
		{"deny else", rules + "deny := true if input.call.tool == \"a\" else := false", 0, ""},
		{"deny set value", rules + `deny := {"no"} if input.call.tool == "a"`, 0, ""},
		{"deny unknown element", rules + `deny contains x if x := input.call.args.n`, 0, ""},
		{"deny number", rules + `deny contains 42 if input.call.tool == "a"`, 3, "yields 42"},
		{"deny number var", rules + `deny contains n if { input.call.tool == "a"; n := 1 + 1 }`, 3, "set[number]"},
		{"deny function", rules + `deny(x) if x == 1`, 3, "is a function"},
		{"deny string value", rules + `deny := "no"`, 3, "yields \"no\""},
		{"deny else string", rules + "deny := true if input.call.tool == \"a\" else := \"no\"", 3, "yields \"no\""},
		{"deny object bad key", rules + `deny contains {"msg": "m"} if input.call.tool == "a"`, 3, "yields"},
		{"deny object number reason", rules + `deny contains {"reason": 1} if input.call.tool == "a"`, 3, "yields"},
		{"deny partial object", rules + `deny[x] := true if x := input.call.tool`, 3, "defined as an object"},
		{"deny nested", "package policycheck.rules.a.b\n\ndeny if input.context.x", 3, "nested below policycheck.rules.a"},
		{"package named deny", "package policycheck.rules.deny\n\ndeny if input.context.x\n\n_helper := 1", 0, ""},
		// A public rule the engine does not read and no rule refers to
		// is a misspelt entry point, not a silent no-op.
		{"deny misspelt", rules + `deny_call contains "no" if input.call.tool == "a"`, 3, "policycheck.rules.x.deny_call is never read"},
		{"hide misspelt", rules + `hide_tools contains "a"`, 3, `Write: hide contains "tool_name"`},
		{"prepare_tools misspelt", filter + `prepare_tool contains "a"`, 3, "policycheck.capabilities.vault.prepare_tool is never read"},
		{"deny misspelt twice", rules + "deny_call contains \"a\" if input.context.x\n\ndeny_call contains \"b\" if input.context.y", 3, "deny_call is never read"},
		// A field the input does not have is always undefined: the rule
		// never fires.
		{"deny on a misspelt call field", rules + `deny if input.call.name == "a"`, 3, "input.call.name is not in the input the engine hands policycheck.rules packages"},
		{"deny on a misspelt top-level field", rules + `deny if input.contxt.env == "prod"`, 3, "input has call, context, dispatch, facts, filters, outgoing"},
		{"deny on a misspelt dispatch field", rules + `deny if input.dispatch.calls[_].tol == "a"`, 3, "input.dispatch.calls[_].tol is not in the input"},
		{"deny on an array read as an object", rules + `deny if input.dispatch.calls.tool == "a"`, 3, "input.dispatch.calls is an array"},
		{"deny on a misspelt approval field", rules + `deny if input.call.approval.knd == "tool-denied"`, 3, "input.call.approval has approvers, call_args, digest, kind, message, override_args"},
		{"hide on the call, which hide never sees", rules + `hide contains "a" if input.call.tool == "b"`, 3, "input.call is not in the input the engine hands hide rules"},
		{"deny on context and args", rules + `deny if { input.context.env == "prod"; input.call.args.amount.value > 40 }`, 0, ""},
		{"deny on a set element", rules + `deny if input.facts.discovered["a"]`, 0, ""},
		{"deny on a computed key", rules + `deny if { k := "tool"; input.call[k] == "a" }`, 0, ""},
		{"filter on a misspelt field", filter + `prepare_tools contains t.name if some t in input.tool`, 3, "input.tool is not in the input the engine hands filters"},
		{"filter on a tool's misspelt field", filter + `prepare_tools contains input.tools[_].nam`, 3, "input.tools[_].nam"},
		{"filter on its input", filter + `prepare_tools contains t.name if { some t in input.tools; t.capability == "vault"; input.context.group == "ops" }`, 0, ""},
		{"a helper deny reads", rules + "limit := 40\n\ndeny if input.call.args.n > limit", 0, ""},
		{"a helper function deny reads", rules + "big(n) if n > 40\n\ndeny if big(input.call.args.n)", 0, ""},
		{"an unused private helper", rules + "_limit := 40\n\ndeny if input.context.x", 0, ""},
		{"deny at root", "package policycheck.rules\n\ndeny if input.context.x", 3, "directly in package policycheck.rules"},
		{"require_approval object", rules + `require_approval contains {"reason": "r", "message": "m"} if input.call.tool == "a"`, 0, ""},
		{"require_approval unknown element", rules + `require_approval contains x if x := input.call.args.r`, 0, ""},
		{"require_approval string", rules + `require_approval contains "ask" if input.call.tool == "a"`, 3, "yields \"ask\""},
		{"require_approval if", rules + `require_approval if input.call.tool == "a"`, 3, "is a complete rule"},
		{"require_approval bad key", rules + `require_approval contains {"who": "m"} if input.call.tool == "a"`, 3, "yields"},
		{"require_approval function", rules + `require_approval(x) if x == 1`, 3, "is a function"},
		{"require_approval nested", "package policycheck.rules.a.b\n\nrequire_approval contains {} if input.context.x", 3, "nested below policycheck.rules.a"},
		{"hide names", rules + `hide contains "get_order" if input.context.g == "x"`, 0, ""},
		{"hide set", rules + `hide := {"get_order"}`, 0, ""},
		{"hide string", rules + `hide := "get_order"`, 3, "yields \"get_order\""},
		{"hide object elem", rules + `hide contains {"name": "get_order"} if input.context.x`, 3, "yields"},
		{"hide function", rules + `hide(x) := {x}`, 3, "is a function"},
		{"hide if", rules + `hide if input.context.x`, 3, "yields true"},
		{"hide object", rules + `hide := {"get_order": true}`, 3, "yields"},
		{"hide number", rules + `hide contains 1 if input.context.x`, 3, "yields 1"},
		{"hide search_tools", rules + `hide contains "search_tools" if input.context.x`, 3, "framework tool \"search_tools\""},
		{"hide set with load_capability", rules + `hide := {"get_order", "load_capability"}`, 3, "framework tool \"load_capability\""},
		{"hide else search_tools", rules + "hide := {\"a\"} if input.context.x else := {\"search_tools\"}", 3, "which no rule can hide"},
		{"hide number var", rules + `hide contains n if n := count(input.context.x)`, 3, "set[number]"},
		{"filter set", filter + `prepare_tools contains n if some n in data.policycheck.registry.names`, 0, ""},
		{"filter bool", filter + `prepare_tools if input.context.x`, 3, "yields true"},
		{"filter function", filter + `prepare_tools(x) := {x}`, 3, "is a function"},
		{"filter nested", "package policycheck.capabilities.vault.x\n\nprepare_tools := set()", 3, "nested"},
		{"decision ok", "package policycheck.availability\n\n" +
			`decision := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}`, 0, ""},
		{"decision missing key", "package policycheck.availability\n\n" + `decision := {"available": set()}`, 3, "yields"},
		{"decision typo key", "package policycheck.availability\n\n" +
			`decision := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": [], "hiden": set()}`, 3, "yields"},
		{"decision set", "package policycheck.availability\n\n" + `decision contains "a"`, 3, "partial set rule"},
		{"decision function", "package policycheck.availability\n\n" + `decision(x) := x`, 3, "is a function"},
		{"decision bool", "package policycheck.availability\n\n" + `decision if input.context.x`, 3, "yields true"},
		{"decision_from_sets read by decision", "package policycheck.availability\n\n" +
			`decision := decision_from_sets if input.context.x` + "\n\n" +
			`decision_from_sets := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}`, 0, ""},
		{"decision_from_sets not read", "package policycheck.availability\n\n" +
			`decision := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}` + "\n\n" +
			`decision_from_sets := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}`, 5,
			"does not depend on it"},
		{"decision_from_sets alone", "package policycheck.availability\n\n" +
			`decision_from_sets := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}`, 3,
			"does not depend on it"},
		{"decision_from_sets bool", "package policycheck.availability\n\n" +
			"decision := " + `{"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}` +
			" if decision_from_sets\n\ndecision_from_sets if input.context.x", 5, "yields true"},
		{"marker above a rule", "package policycheck.rules.x\n\n# METADATA\n# custom:\n#   policycheck:\n#     enforcement: log_only\nhide := set()", 3,
			"is not read at rule scope"},
		{"marker beside custom.policycheck above a rule", "package policycheck.rules.x\n\n# METADATA\n# custom:\n#   enforcement: log_only\nhide := set()", 3,
			"is not read at rule scope"},
		{"other custom METADATA above a rule", "package policycheck.rules.x\n\n# METADATA\n# custom:\n#   owner: ops\nhide := set()", 0, ""},
		{"marker unknown", "# METADATA\n# title: x\n# custom:\n#   policycheck:\n#     nope: true\npackage policycheck.rules.x\n\nhide := set()", 1, "custom.policycheck.nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			probs, _ := contract.Check(compile(t, tc.src))
			if tc.row == 0 {
				if len(probs) > 0 {
					t.Fatalf("accepted shape refused: %+v", probs)
				}
				return
			}
			if len(probs) == 0 {
				t.Fatalf("refused shape accepted")
			}
			p := probs[0]
			if p.File != "op.rego" || p.Row != tc.row || !strings.Contains(p.Message, tc.want) {
				t.Fatalf("got %s:%d:%d %s: %s; want row %d and %q", p.File, p.Row, p.Col, p.Code, p.Message, tc.row, tc.want)
			}
			if p.Code != contract.CodeMarker && p.Code != contract.CodeInputField && !strings.Contains(p.Message, "Write: ") {
				t.Fatalf("message shows no right form: %s", p.Message)
			}
		})
	}
}

// TestEntryPoint: the engine reads decision_from_sets when the policy set
// defines it, decision otherwise; and every rule the engine reads must be
// reachable from the rule it evaluates.
func TestEntryPoint(t *testing.T) {
	const obj = `{"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}`
	plain := compile(t, "package policycheck.availability\n\ndecision := "+obj)
	if got := contract.EntryPoint(plain); got != "policycheck.availability.decision" {
		t.Fatalf("entry point without decision_from_sets: %s", got)
	}
	both := compile(t, "package policycheck.availability\n\ndecision := decision_from_sets\n\ndecision_from_sets := "+obj)
	if got := contract.EntryPoint(both); got != "policycheck.availability.decision_from_sets" {
		t.Fatalf("entry point with decision_from_sets: %s", got)
	}
	// A rules package read only by decision's other branch is never read
	// by the engine, which evaluates decision_from_sets: refused.
	src := "package policycheck.availability\n\n" +
		"decision := decision_from_sets if input.sets else := object.union(decision_from_sets, {\"x\": data.policycheck.rules})\n\n" +
		"decision_from_sets := " + obj + "\n"
	rules, err := ast.ParseModuleWithOpts("rules.rego", "package policycheck.rules.x\n\nhide := {\"a\"}\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ast.ParseModuleWithOpts("op.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	c := ast.NewCompiler()
	c.Compile(map[string]*ast.Module{"op.rego": m, "rules.rego": rules})
	if c.Failed() {
		t.Fatal(c.Errors)
	}
	probs, _ := contract.Check(c)
	if len(probs) != 1 || probs[0].File != "rules.rego" || !strings.Contains(probs[0].Message, "decision_from_sets does not depend on it") {
		t.Fatalf("a hide rule only decision reads: %+v", probs)
	}
}

// TestLocations: the engine names the rule's first definition.
func TestLocations(t *testing.T) {
	_, locs := contract.Check(compile(t, "package policycheck.rules.x\n\ndeny contains x if x := input.call.args.n\n"))
	loc := locs["data.policycheck.rules.x.deny"]
	if loc == nil || loc.File != "op.rego" || loc.Row != 3 {
		t.Fatalf("locations: %v", locs)
	}
}

// TestPackageMarker reads a marker off a package's METADATA.
func TestPackageMarker(t *testing.T) {
	c := compile(t, "# METADATA\n# title: x\n# custom:\n#   policycheck:\n#     nope: 3\npackage policycheck.rules.x\n\nhide := set()")
	v, ok := contract.PackageMarker(c.Modules["op.rego"], "nope")
	if !ok || v != 3 && v != float64(3) && v != uint64(3) && v != int(3) {
		t.Fatalf("marker: %v %v (%T)", v, ok, v)
	}
	if _, ok := contract.PackageMarker(c.Modules["op.rego"], "other"); ok {
		t.Fatal("an unset marker read as set")
	}
}

// TestUnreadRuleReportedOnce: a misspelt entry point defined by several
// rules is one problem, at its first definition.
func TestUnreadRuleReportedOnce(t *testing.T) {
	probs, _ := contract.Check(compile(t, "package policycheck.rules.x\n\ndeny_call contains \"a\" if input.context.x\n\ndeny_call contains \"b\" if input.context.y"))
	if len(probs) != 1 || probs[0].Row != 3 {
		t.Fatalf("want one problem at row 3, got %+v", probs)
	}
}
