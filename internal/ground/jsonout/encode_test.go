package jsonout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/ground/jsonout"
	"github.com/policycheck/policycheck/loader"
)

// TestEncodeIsTheEncoders: Encode writes what a json.Encoder
// with two-space indentation and no HTML escaping writes, byte for byte,
// whether the value marshals itself (its fast path) or not; policycheck
// eval's output and the sidecar's are compared on that promise.
func TestEncodeIsTheEncoders(t *testing.T) {
	tricky := "<b>&\u2028\u2029 é \x01 \"q\""
	d := &engine.Decision{Available: []string{"a", tricky}, Advertised: []string{}, Errors: []string{tricky},
		Calls: []engine.CallVerdict{{Tool: tricky, Verdict: engine.Denied, Message: tricky}}}
	reg, err := loader.ParseRegistry("registry.json", []byte(`{"capabilities": [], "tools": [{"name": "get_time"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(context.Background(), engine.Registry(reg))
	if err != nil {
		t.Fatal(err)
	}
	step, err := eng.NewRun().Step(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"decision":     d,
		"nil decision": (*engine.Decision)(nil),
		"step":         step,
		"plain value":  map[string]any{"x": []any{tricky, 1.5, nil}},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := jsonout.Encode(&got, v); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s:\n got %q\nwant %q", name, got.String(), want.String())
		}
		// The Encoder keeps what a MarshalJSON escaped: the engine's
		// write <, > and & as themselves too.
		if name == "decision" && !strings.Contains(got.String(), "<b>&") {
			t.Errorf("%s: <b>& is escaped in %s", name, got.String())
		}
	}
}
