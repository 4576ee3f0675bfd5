package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

// FuzzArgsReadOnce (issue 43, item 1): whatever bytes a call's arguments
// hold, either the call is invalid_args or the input the policy saw
// carries the arguments, equal to their decoding by an independent reader
// (encoding/json); never a call decided with its arguments missing. The
// bytes are tried as the arguments themselves (when the history decoder
// takes them) and as string arguments holding them, on a tool with a
// numeric schema (whose validator once panicked) and on one without.
// scripts/test.sh runs it briefly.
func FuzzArgsReadOnce(f *testing.F) {
	for _, s := range []string{
		`{"amount": 250}`, `{"amount": 1e50000}`, `{"amount": 999999, "note": 1e50000}`,
		`{"amount": 1e10000000}`, `{"amount": 1e-10000000}`, `{"amount": 1000000000, "amount": 250}`,
		`{"a": [{"b": 1, "b": 2}]}`, `"{\"order_id\": 7}xyz"`, `"{\"order_id\": 7}"`, `"[1, 1e50000]"`,
		`"not json"`, `""`, `null`, `{"a": "\u00e9\ud83d\ude00"}`, `{"n": -0.0e-400}`, `{"n": 1` + strings.Repeat("0", 400) + `}`,
		`"` + strings.Repeat("[", 201) + strings.Repeat("]", 201) + `"`, `{"a": {"b": {"c": [true, false, null]}}}`,
	} {
		f.Add([]byte(s))
	}
	reg := mustRegistry(f, `{"tools": [
		{"name": "refund", "parameters_json_schema": {"type": "object",
			"properties": {"amount": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01}}}},
		{"name": "plain"}
	]}`)
	e := mustEngine(f, reg)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		quoted, err := json.Marshal(string(data))
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]byte{data, quoted} {
			for _, tool := range []string{"refund", "plain"} {
				hist := wHistory(wReq(wUser("go")), wResp("", wCall(tool, "c1", string(args))))
				h, err := loader.DecodeHistory("fuzz.json", []byte(hist), loader.DefaultLimits())
				if err != nil {
					continue // not arguments a history can hold
				}
				d, err := e.Decide(ctx, engine.Request{History: h})
				if err != nil {
					t.Fatalf("%s %s: %v", tool, args, err)
				}
				if len(d.Calls) != 1 {
					t.Fatalf("%s %s: %d calls", tool, args, len(d.Calls))
				}
				if d.Calls[0].Verdict == engine.InvalidArgs {
					continue
				}
				in, err := e.Input(ctx, engine.Request{History: h})
				if err != nil {
					t.Fatalf("%s %s: %v", tool, args, err)
				}
				got := in.(map[string]any)["dispatch"].(map[string]any)["calls"].([]any)[0].(map[string]any)["args"]
				want, ok := independentArgs(h[1].Parts[0].Args)
				if !ok {
					t.Fatalf("%s %s: verdict %s, but encoding/json cannot read the arguments", tool, args, d.Calls[0].Verdict)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s %s: verdict %s; the policy saw args %#v, the arguments are %#v", tool, args, d.Calls[0].Verdict, got, want)
				}
			}
		}
	})
}

// independentArgs decodes arguments as the policies should read them,
// with encoding/json (numbers as json.Number): a string holding exactly
// one JSON object is that object, any other string is itself; ok is
// false when the bytes are not JSON.
func independentArgs(raw []byte) (any, bool) {
	var v any
	if err := decodeOne(raw, &v); err != nil {
		return nil, false
	}
	if s, isStr := v.(string); isStr {
		var inner any
		if decodeOne([]byte(s), &inner) == nil {
			if _, isObj := inner.(map[string]any); isObj {
				return inner, true
			}
		}
	}
	return v, true
}

func decodeOne(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) > 0 {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("data after the JSON value")
