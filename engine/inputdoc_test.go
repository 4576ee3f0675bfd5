package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"reflect"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/approvalcases"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
)

// decodeNumbers decodes JSON as a decision log's reader does: numbers
// kept as written.
func decodeNumbers(t testing.TB, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// decideAgain decides d again from its input document as a log carries
// it (JSON): the decision, both input documents' JSON and the approvals
// rebuilt.
func decideAgain(t *testing.T, eng *engine.Engine, d *engine.Decision) (*engine.Decision, []byte, []byte, facts.Approvals) {
	t.Helper()
	doc, err := d.InputDocument()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	f, c, a, err := engine.FactsFromInput(decodeNumbers(t, raw))
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	again, err := eng.Decide(context.Background(), engine.Request{Facts: f, Context: c, Approvals: a})
	if err != nil {
		t.Fatal(err)
	}
	doc2, _ := again.InputDocument()
	raw2, _ := json.Marshal(doc2)
	return again, raw, raw2, a
}

// TestFactsFromInputRoundTrip decides every prefix of generated histories,
// rebuilds facts and context from the decision's input document as a log
// carries it (JSON), decides again, and requires the same input document
// and the same decision: a logged decision can be decided again exactly.
func TestFactsFromInputRoundTrip(t *testing.T) {
	ctx := context.Background()
	ctxDoc := map[string]any{"group": "support", "n": json.Number("3")}
	for seed := int64(1); seed <= 4; seed++ {
		o := gen.Default(40)
		reg, err := loader.ParseRegistry("gen.json", gen.Registry(seed, o))
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(ctx, engine.Registry(reg))
		if err != nil {
			t.Fatal(err)
		}
		h, err := loader.DecodeHistory("gen.json", gen.History(seed, o), loader.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= len(h); n++ {
			d, err := eng.Decide(ctx, engine.Request{History: h[:n], Context: ctxDoc})
			if err != nil {
				t.Fatal(err)
			}
			again, raw, raw2, _ := decideAgain(t, eng, d)
			if !bytes.Equal(raw, raw2) {
				t.Fatalf("seed %d prefix %d: input documents differ:\n%s\n%s", seed, n, raw, raw2)
			}
			j1, _ := json.Marshal(d)
			j2, _ := json.Marshal(again)
			if !bytes.Equal(j1, j2) {
				t.Fatalf("seed %d prefix %d: decisions differ:\n%s\n%s", seed, n, j1, j2)
			}
		}
	}
}

// TestFactsFromInputRebuildsBoundApprovals decides every approval case
// (approved, denied, with override_args, bound to another call, ...),
// rebuilds the request from the input document as a log carries it, and
// decides again: the same input document, the same verdicts, and, where
// every approval the request carried was bound to a call (the only ones
// an input document holds), the same decision.
func TestFactsFromInputRebuildsBoundApprovals(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("registry.yaml", []byte(approvalcases.Registry))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: approvalcases.PolicyFile, Text: approvalcases.Policy}))
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := 0
	for _, tc := range approvalcases.Cases() {
		h, err := loader.DecodeHistory("history.json", tc.History, loader.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		approvals, err := loader.ParseApprovalsMap("approvals.json", "", tc.Approvals)
		if err != nil {
			t.Fatal(err)
		}
		d, err := eng.Decide(ctx, engine.Request{History: h, Approvals: approvals})
		if err != nil {
			t.Fatal(err)
		}
		again, raw, raw2, a := decideAgain(t, eng, d)
		if !bytes.Equal(raw, raw2) {
			t.Errorf("%s: input documents differ:\n%s\n%s", tc.Name, raw, raw2)
		}
		for i := range d.Calls {
			if d.Calls[i].Verdict != again.Calls[i].Verdict || d.Calls[i].Message != again.Calls[i].Message {
				t.Errorf("%s: call %d: %s %q, again %s %q", tc.Name, i, d.Calls[i].Verdict, d.Calls[i].Message, again.Calls[i].Verdict, again.Calls[i].Message)
			}
		}
		if len(a) != len(approvals) {
			continue
		}
		rebuilt++
		j1, _ := json.Marshal(d)
		j2, _ := json.Marshal(again)
		if !bytes.Equal(j1, j2) {
			t.Errorf("%s: decisions differ:\n%s\n%s", tc.Name, j1, j2)
		}
	}
	if rebuilt < 3 {
		t.Fatalf("only %d cases had every approval bound", rebuilt)
	}
}

// TestFactsFromInputRefusesBadDocuments names the pointer of the first bad
// field.
func TestFactsFromInputRefusesBadDocuments(t *testing.T) {
	good := func() map[string]any {
		return decodeNumbers(t, []byte(`{"facts":{"window":{"message":0,"part":0},"discovered":[],"loaded":[],"returned":[],"active_capabilities":[]},
			"outgoing":{"discovered":[],"loaded":[]},"context":{},
			"dispatch":{"provider":null,"window":{"message":0,"part":0},"loaded":[],"evidence":{"discovered":[],"loaded":[]},
			"active_capabilities":[],"same_response":{"revealed":[],"pending_loads":[]},
			"calls":[{"index":0,"part":0,"tool":"x","tool_call_id":"c1","tool_kind":null,"args":{},
				"approval":{"kind":"tool-denied","digest":"sha256:00","approvers":["ana"],"call_args":{},"message":"no"}},
				{"index":1,"part":1,"tool":"x","tool_call_id":"c2","tool_kind":null,"args":{"a":1},
				"approval":{"kind":"tool-approved","digest":"sha256:01","approvers":[],"call_args":{"a":2},"override_args":{"a":1}}}]}}`)).(map[string]any)
	}
	// set returns a change of call n's field path to v (removed when v
	// is remove).
	type removed struct{}
	remove := removed{}
	set := func(n int, v any, path ...string) func(m map[string]any) {
		return func(m map[string]any) {
			o := m["dispatch"].(map[string]any)["calls"].([]any)[n].(map[string]any)
			for _, k := range path[:len(path)-1] {
				o = o[k].(map[string]any)
			}
			if v == remove {
				delete(o, path[len(path)-1])
			} else {
				o[path[len(path)-1]] = v
			}
		}
	}
	f, _, approvals, err := engine.FactsFromInput(good())
	if err != nil {
		t.Fatalf("good document refused: %v", err)
	}
	want := facts.Approvals{
		"c1": {Kind: facts.ToolDenied, Digest: "sha256:00", Approvers: []string{"ana"}, Message: "no"},
		"c2": {Kind: facts.ToolApproved, Digest: "sha256:01", Approvers: nil, OverrideArgs: json.RawMessage(`{"a":1}`)},
	}
	if !reflect.DeepEqual(approvals, want) {
		t.Errorf("approvals: got %+v, want %+v", approvals, want)
	}
	if got := string(f.Dispatch.Calls[1].Args); got != `{"a":2}` {
		t.Errorf("a call with an approval gets back its own arguments (call_args): got %s", got)
	}
	cases := map[string]func(m map[string]any){
		"/facts":          func(m map[string]any) { delete(m, "facts") },
		"/facts/loaded/0": func(m map[string]any) { m["facts"].(map[string]any)["loaded"] = []any{json.Number("1")} },
		"/dispatch/calls/0/tool": func(m map[string]any) {
			m["dispatch"].(map[string]any)["calls"].([]any)[0].(map[string]any)["tool"] = nil
		},
		"/dispatch/calls/0/tool_kind": func(m map[string]any) {
			m["dispatch"].(map[string]any)["calls"].([]any)[0].(map[string]any)["tool_kind"] = "search"
		},
		"/outgoing": func(m map[string]any) { m["outgoing"] = "x" },
		"/dispatch/calls/0/approval": func(m map[string]any) {
			m["dispatch"].(map[string]any)["calls"].([]any)[0].(map[string]any)["approval"] = true
		},
		"/dispatch/calls/0/approval/kind":          set(0, "ok", "approval", "kind"),
		"/dispatch/calls/0/approval/digest":        set(0, nil, "approval", "digest"),
		"/dispatch/calls/0/approval/approvers/0":   set(0, []any{json.Number("1")}, "approval", "approvers"),
		"/dispatch/calls/0/approval/approvers":     set(0, "ana", "approval", "approvers"),
		"/dispatch/calls/0/approval/call_args":     set(0, remove, "approval", "call_args"),
		"/dispatch/calls/1/approval/override_args": set(1, []any{}, "approval", "override_args"),
		"/dispatch/calls/0/approval/message":       set(0, remove, "approval", "message"),
		"/dispatch/calls/0/tool_call_id":           set(0, nil, "tool_call_id"),
		"/dispatch/calls/1/approval":               set(1, "c1", "tool_call_id"),
	}
	for ptr, spoil := range cases {
		m := good()
		spoil(m)
		_, _, _, err := engine.FactsFromInput(m)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(ptr+":")) {
			t.Errorf("%s: got %v", ptr, err)
		}
	}
	if !reflect.DeepEqual(good(), good()) {
		t.Fatal("fixture not deterministic")
	}
}

// A logged decision's input document, decided again by another policy
// set: the facts and the context come from the document, the filters
// from the engine that decides.
func ExampleFactsFromInput() {
	ctx := context.Background()
	eng := exampleEngine()
	h, err := loader.DecodeHistory("history.json", []byte(exampleHistory), loader.DefaultLimits())
	if err != nil {
		log.Fatal(err)
	}
	d, err := eng.Decide(ctx, engine.Request{History: h})
	if err != nil {
		log.Fatal(err)
	}
	doc, err := d.InputDocument() // what the sidecar's decision log carries
	if err != nil {
		log.Fatal(err)
	}
	raw, _ := json.Marshal(doc)
	var logged any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&logged); err != nil {
		log.Fatal(err)
	}
	f, ctxDoc, approvals, err := engine.FactsFromInput(logged)
	if err != nil {
		log.Fatal(err)
	}
	again, err := eng.Decide(ctx, engine.Request{Facts: f, Context: ctxDoc, Approvals: approvals})
	if err != nil {
		log.Fatal(err)
	}
	for i, c := range again.Calls {
		fmt.Println(c.Tool, c.Verdict, c.Verdict == d.Calls[i].Verdict)
	}
	// Output:
	// read_secret execute true
	// delete_secret unknown_tool true
	// search_docs not_available_yet true
	// send_email unknown_tool true
}
