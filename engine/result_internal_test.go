package engine

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/internal/contract"
)

// TestDecodeResultReadsTheContract holds decodeResult to contract.Result,
// the policy's decision document, in both directions: every path the type
// defines is read (a value of the wrong type there, or, for a flagged
// value, its absence, changes what decodeResult returns), and resultKey,
// through which it reads, refuses a key the type lacks (this test reads
// every key, so such a read panics here).
func TestDecodeResultReadsTheContract(t *testing.T) {
	answer := func() map[string]any { return map[string]any{"package": "p", "reason": "r", "message": "m"} }
	base := func() map[string]any {
		return map[string]any{
			"available": []any{"a", "b"}, "advertised": []any{"a"}, "dispatch_available": []any{"a"},
			"hidden": []any{"b"}, "would_hide": []any{"a"},
			"verdicts": []any{map[string]any{
				"verdict": "denied", "rule": "deny", "reason": "r",
				"form":     map[string]any{"capability": "c"},
				"by":       []any{map[string]any{"rule": "hide", "package": "p"}},
				"denials":  []any{answer()},
				"requests": []any{answer()}, "would_deny": []any{answer()},
			}},
		}
	}
	decode := func(doc map[string]any) string {
		v, err := ast.InterfaceToValue(doc)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeResult(ast.NewTerm(v), nil)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("%#v %v", *r, r.dispatchErr)
	}
	for _, p := range contract.ResultPaths() {
		doc := base()
		keys := strings.Split(p.Path, ".")
		top := strings.TrimSuffix(keys[0], "[]")
		if top == "rule_errors" {
			doc["rule_errors"] = []any{map[string]any{"package": "p", "rule": "hide", "value": 1}}
		}
		// Walk to the object holding the last key (the first element of
		// each array on the way).
		obj := doc
		for _, k := range keys[:len(keys)-1] {
			name, isArray := strings.CutSuffix(k, "[]")
			next := obj[name]
			if isArray {
				next = next.([]any)[0]
			}
			obj = next.(map[string]any)
		}
		last := strings.TrimSuffix(keys[len(keys)-1], "[]")
		if (last == "rule" || last == "value") && top == "verdicts" && len(keys) == 3 && keys[1] != "by[]" {
			// An answer's rule and value are read on a flagged value.
			obj["rule"], obj["value"] = "deny", 1
		}
		before := decode(doc)
		if strings.HasPrefix(before, "error") {
			t.Fatalf("%s: the document to spoil is refused: %s", p.Path, before)
		}
		if p.Open() {
			delete(obj, last)
		} else {
			obj[last] = 7 // no field of a decision is a number
		}
		if after := decode(doc); after == before {
			t.Errorf("%s: decodeResult does not read it (contract.Result defines it)", p.Path)
		}
	}
	if !reflect.DeepEqual(base(), base()) {
		t.Fatal("fixture not deterministic")
	}
}
