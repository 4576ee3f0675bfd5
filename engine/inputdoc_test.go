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
	"github.com/policycheck/policycheck/internal/gen"
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
			doc, err := d.InputDocument()
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			f, c, err := engine.FactsFromInput(decodeNumbers(t, raw))
			if err != nil {
				t.Fatalf("seed %d prefix %d: %v", seed, n, err)
			}
			again, err := eng.Decide(ctx, engine.Request{Facts: f, Context: c})
			if err != nil {
				t.Fatal(err)
			}
			doc2, _ := again.InputDocument()
			raw2, _ := json.Marshal(doc2)
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

// TestFactsFromInputRefusesBadDocuments names the pointer of the first bad
// field.
func TestFactsFromInputRefusesBadDocuments(t *testing.T) {
	good := func() map[string]any {
		return decodeNumbers(t, []byte(`{"facts":{"window":{"message":0,"part":0},"discovered":[],"loaded":[],"returned":[],"active_capabilities":[]},
			"outgoing":{"discovered":[],"loaded":[]},"context":{},
			"dispatch":{"provider":null,"window":{"message":0,"part":0},"loaded":[],"evidence":{"discovered":[],"loaded":[]},
			"active_capabilities":[],"same_response":{"revealed":[],"pending_loads":[]},
			"calls":[{"index":0,"part":0,"tool":"x","tool_call_id":"c1","tool_kind":null,"args":{}}]}}`)).(map[string]any)
	}
	if _, _, err := engine.FactsFromInput(good()); err != nil {
		t.Fatalf("good document refused: %v", err)
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
	}
	for ptr, spoil := range cases {
		m := good()
		spoil(m)
		_, _, err := engine.FactsFromInput(m)
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
	f, ctxDoc, err := engine.FactsFromInput(logged)
	if err != nil {
		log.Fatal(err)
	}
	again, err := eng.Decide(ctx, engine.Request{Facts: f, Context: ctxDoc})
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
