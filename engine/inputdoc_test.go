package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"reflect"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/contract"
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

// TestFactsFromInputReadsTheContract holds FactsFromInput to
// contract.Input in both directions: every path the type defines is read
// (a value of the wrong type there, or the absence of an operator's or
// model's value, changes what it returns) but the ones it documents as
// not read (the filter results, a call's index and invalid_args mark,
// which the engine computes again), which change nothing; and its reader
// refuses a key the type lacks (this test reads every key, so such a
// read panics here).
//
// Twice: a document with facts.tool_calls, whose calls' window is the
// engine's to write again from them (not read), and one without, as a
// policy that reads the window but not the calls logs it, whose window
// is read back (and the absent tool calls are not).
func TestFactsFromInputReadsTheContract(t *testing.T) {
	for _, withCalls := range []bool{true, false} {
		t.Run(fmt.Sprint("tool_calls=", withCalls), func(t *testing.T) { factsFromInputReadsTheContract(t, withCalls) })
	}
}

func factsFromInputReadsTheContract(t *testing.T, withCalls bool) {
	calls := `"tool_calls":{"x":[{"tool_call_id":"c0","message":1,"part":0,"timestamp":"2026-01-01T00:00:00Z","outcome":"returned","args":{"a":0}}]},
			"builtin_returns":[{"tool":"web_search","tool_call_id":"w0","message":1,"part":1}],
			"unpaired_returns":[{"tool":"read_file","tool_call_id":"f0","message":1,"part":2}],`
	if !withCalls {
		calls = ""
	}
	window := `"window":{"untrusted":true,"confidentiality":"secret","sources":[{"kind":"tool-return","tool":"x","count":2,"tool_call_id":"c0",
				"message":1,"part":0,"summarised":true,"integrity":"untrusted","confidentiality":"internal"}]},"args_integrity":{"/a":"untrusted"},`
	full := func() map[string]any {
		return decodeNumbers(t, []byte(`{"facts":{"window":{"message":1,"part":0},"discovered":["a"],"loaded":["c"],"returned":["a"],"active_capabilities":["c"],
			`+calls+`"flow_index_truncated":true},
			"outgoing":{"discovered":["a"],"loaded":["c"]},"context":{"k":"v"},
			"filters":{"next":{"dropped":["a"],"errors":[{"capability":"c","message":"m"}]},"dispatch":{"dropped":["a"],"errors":[{"capability":"c","message":"m"}]},
				"errors":[{"capability":"c","message":"m"}]},
			"dispatch":{"provider":"p","window":{"message":1,"part":0},"loaded":["c"],"evidence":{"discovered":["a"],"loaded":["c"]},
			"active_capabilities":["c"],"same_response":{"revealed":["a"],"pending_loads":["c"]},
			"calls":[{"index":0,"part":0,"tool":"x","tool_call_id":"c1","tool_kind":null,"args":{},"invalid_args":true,`+window+`
				"flows":[{"path":"/a","match":"token","token":"email","whole":true,"source":{"kind":"tool-return","tool_call_id":"r1","tool":"y","labels":["secret"],"message":0,"part":0}},
					{"path":"/a","match":"exact","token":null,"whole":true,"source":{"kind":"user-prompt","tool_call_id":null,"tool":null,"labels":[],"message":1,"part":1,"beside":["y"]}}],
				"approval":{"kind":"tool-denied","digest":"sha256:00","approvers":["ana"],"call_args":{},"override_args":{"a":1},"message":"no"}},
				{"index":1,"part":1,"tool":"x","tool_call_id":"c2","tool_kind":"tool-search","args":{"a":1},`+strings.TrimSuffix(window, ",")+`}]}}`)).(map[string]any)
	}
	notRead := func(path string) bool {
		// The labels are the registry's, written from the facts read back
		// (labels.go): not read; but the window is, without the calls.
		// (Spoiled alike in every call, a window read from the calls
		// changes nothing.)
		if strings.HasPrefix(path, "facts.tool_calls") || strings.HasPrefix(path, "facts.builtin_returns") || strings.HasPrefix(path, "facts.unpaired_returns") {
			return !withCalls
		}
		labels := (withCalls && (strings.HasPrefix(path, "dispatch.calls[].window") || strings.HasPrefix(path, "dispatch.calls[].args_integrity"))) ||
			path == "dispatch.calls[].flows[].source.integrity" || path == "dispatch.calls[].flows[].source.confidentiality"
		return labels || strings.HasPrefix(path, "filters") || path == "dispatch.calls[].index" || path == "dispatch.calls[].invalid_args"
	}
	read := func(doc map[string]any) []any {
		f, c, a, err := engine.FactsFromInput(doc)
		return []any{f, c, a, fmt.Sprint(err)}
	}
	// spoil changes key path[0] below v, in every element of an array
	// and every value of a map on the way.
	var spoil func(v any, path []string, open bool)
	spoil = func(v any, path []string, open bool) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				spoil(e, path, open)
			}
			return
		case map[string]any:
			key := strings.TrimSuffix(path[0], "[]")
			if key == "*" {
				for k := range x {
					if len(path) == 1 {
						x[k] = json.Number("7")
					} else {
						spoil(x[k], path[1:], open)
					}
				}
				return
			}
			sub, ok := x[key]
			switch {
			case !ok:
			case len(path) > 1:
				spoil(sub, path[1:], open)
			case open:
				delete(x, key)
			default:
				x[key] = json.Number("7") // no field of the document is a whole number here
			}
		}
	}
	before := read(full())
	if err := before[3]; err != "<nil>" {
		t.Fatalf("the document to spoil is refused: %s", err)
	}
	for _, p := range contract.InputPaths() {
		doc := full()
		path := strings.Split(strings.ReplaceAll(p.Path, ".*", "/*"), ".")
		var keys []string
		for _, k := range path {
			keys = append(keys, strings.Split(k, "/")...)
		}
		spoil(doc, keys, p.Open() || p.Type == "number")
		changed := !reflect.DeepEqual(read(doc), before)
		switch {
		case notRead(p.Path) && changed:
			t.Errorf("%s: FactsFromInput reads it, which it says it does not", p.Path)
		case !notRead(p.Path) && !changed:
			t.Errorf("%s: FactsFromInput does not read it (contract.Input defines it)", p.Path)
		}
	}
}

// TestFactsFromInputReadsTheWindowBack: without facts.tool_calls, the
// calls' window is read back as the returns per tool it lists, with the
// labels it recorded; calls of one response whose windows differ are
// refused (the engine writes one window per response).
func TestFactsFromInputReadsTheWindowBack(t *testing.T) {
	doc := func(second string) map[string]any {
		w := `{"untrusted":true,"confidentiality":"secret","sources":[{"kind":"builtin-tool-return","tool":"web_search","count":3,"tool_call_id":"w2",
			"message":4,"part":1,"summarised":true,"integrity":"untrusted","confidentiality":"internal"}]}`
		if second == "" {
			second = w
		}
		return decodeNumbers(t, []byte(`{"facts":{"window":{"message":2,"part":0},"discovered":[],"loaded":[],"returned":[],"active_capabilities":[]},
			"outgoing":{"discovered":[],"loaded":[]},"context":{},
			"dispatch":{"provider":null,"window":{"message":2,"part":0},"loaded":[],"evidence":{"discovered":[],"loaded":[]},
			"active_capabilities":[],"same_response":{"revealed":[],"pending_loads":[]},
			"calls":[{"index":0,"part":0,"tool":"x","tool_call_id":"c1","tool_kind":null,"args":{},"window":`+w+`},
				{"index":1,"part":1,"tool":"x","tool_call_id":"c2","tool_kind":null,"args":{},"window":`+second+`}]}}`)).(map[string]any)
	}
	f, _, _, err := engine.FactsFromInput(doc(""))
	if err != nil {
		t.Fatal(err)
	}
	id := "w2"
	want := []facts.ToolReturns{{Kind: facts.BuiltinToolReturn, Tool: "web_search", Count: 3, ToolCallID: &id, Message: 4, Part: 1,
		Label: &facts.Label{Integrity: "untrusted", Confidentiality: "internal"}}}
	if !reflect.DeepEqual(f.ReturnsByTool, want) || !reflect.DeepEqual(f.ReturnsLabel, &facts.Label{Integrity: "untrusted", Confidentiality: "secret"}) {
		t.Errorf("read back as %+v, label %+v; want %+v", f.ReturnsByTool, f.ReturnsLabel, want)
	}
	if f.ToolCalls != nil || f.BuiltinReturns != nil {
		t.Errorf("no calls in the document, but read back %v, %v", f.ToolCalls, f.BuiltinReturns)
	}
	_, _, _, err = engine.FactsFromInput(doc(`{"untrusted":false,"confidentiality":"public","sources":[]}`))
	if err == nil || !strings.Contains(err.Error(), "/dispatch/calls/1/window") {
		t.Errorf("two windows in one response: got %v, want it refused at the second", err)
	}
}

// TestFactsFromInputReadsFlowsLoggedBeforeKindAndTokens: a decision log
// written before flows carried source.kind, token and whole (issue 47)
// still replays: its flows read back as the tool-return flows they were;
// a present field of the wrong shape is still refused.
func TestFactsFromInputReadsFlowsLoggedBeforeKindAndTokens(t *testing.T) {
	doc := func(flow string) map[string]any {
		return decodeNumbers(t, []byte(`{"facts":{"window":{"message":0,"part":0},"discovered":[],"loaded":[],"returned":[],"active_capabilities":[]},
			"outgoing":{"discovered":[],"loaded":[]},"context":{},
			"dispatch":{"provider":null,"window":{"message":0,"part":0},"loaded":[],"evidence":{"discovered":[],"loaded":[]},
			"active_capabilities":[],"same_response":{"revealed":[],"pending_loads":[]},
			"calls":[{"index":0,"part":0,"tool":"x","tool_call_id":"c1","tool_kind":null,"args":{"a":"abcdefghij"},
				"flows":[`+flow+`]}]}}`)).(map[string]any)
	}
	old := `{"path":"/a","match":"exact","source":{"tool_call_id":"r1","tool":"y","labels":[],"message":0,"part":0}}`
	f, _, _, err := engine.FactsFromInput(doc(old))
	if err != nil {
		t.Fatalf("a flow logged before kind, token and whole: %v", err)
	}
	got := f.Dispatch.Calls[0].Flows
	if len(got) != 1 || got[0].Source.Kind != facts.ToolReturn || got[0].Match != facts.FlowExact || got[0].Token != 0 || got[0].Whole {
		t.Errorf("read back as %+v, want one exact tool-return flow", got)
	}
	bad := `{"path":"/a","match":"exact","token":null,"whole":"yes","source":{"kind":"tool-return","tool_call_id":"r1","tool":"y","labels":[],"message":0,"part":0}}`
	if _, _, _, err := engine.FactsFromInput(doc(bad)); err == nil || !strings.Contains(err.Error(), "/dispatch/calls/0/flows/0/whole") {
		t.Errorf("a whole that is not a boolean: got %v, want it refused at its pointer", err)
	}
}
