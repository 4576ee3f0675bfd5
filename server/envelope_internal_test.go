package server

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/strictjson"
)

// FuzzScanEnvelope: the envelope scanner accepts exactly the bodies that
// encoding/json accepts as one JSON object and that are strict JSON (see
// internal/testkit/strictjson), and returns the same members.
func FuzzScanEnvelope(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"history": []}`, `{"history": [{"kind": "request"}], "context": {"a": [1, 2.5e3, -0, true, null]}}`,
		`{"a\u0062c": "x\n"}`, `{"history": [1,]}`, `{"x": 01}`, `{"x": "\q"}`, `[]`, `{"a":1}x`, `{"a" 1}`,
		`{"history": "s", "history": [2]}`, `{"context": {"u": "\ud800"}}`, `{"context": {"u": "\ud83d\ude00\\ud800"}}`, "{\"\x80\": []}", `{"history": [{"a": "x\\\"]}"}, ["\\\\"], "]"]}`, ` { "registry" : { } } `, `{"x": 1.}`, `{"x": tru}`, "{\"x\": \"\x01\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var obj map[string]json.RawMessage
		err := json.Unmarshal(body, &obj)
		isObj := err == nil && obj != nil && strictjson.Valid(body)
		// Strict everywhere when no member's elements are kept.
		_, herr := scanEnvelope(body, []string{"history", "context", "abc"})
		if (herr == nil) != isObj {
			t.Fatalf("scanner ok=%v, encoding/json ok=%v (%v) on %q", herr == nil, isObj, err, body)
		}
		// Keeping the history's elements skips them structurally: every
		// valid body is still accepted, with the same members.
		env, herr := scanEnvelope(body, []string{"history", "context", "abc"}, "history")
		if !isObj {
			return
		}
		if herr != nil {
			t.Fatalf("scanner refused a valid body: %v: %q", herr, body)
		}
		var unknown []string
		for k := range obj {
			if k != "history" && k != "context" && k != "abc" {
				unknown = append(unknown, k)
			}
		}
		if !sameSet(unknown, env.Unknown) {
			t.Fatalf("unknown members: scanner %q, encoding/json %q", env.Unknown, unknown)
		}
		for _, k := range []string{"history", "context", "abc"} {
			want, ok := obj[k]
			got, gok := env.Members[k]
			if ok != gok || (ok && string(want) != string(got)) {
				t.Fatalf("member %s: scanner %q, encoding/json %q", k, got, want)
			}
		}
		var elems []json.RawMessage
		if json.Unmarshal(obj["history"], &elems) == nil && obj["history"] != nil && string(obj["history"]) != "null" {
			if len(elems) != len(env.Elements["history"]) {
				t.Fatalf("history elements: scanner %d, encoding/json %d", len(env.Elements["history"]), len(elems))
			}
			for i := range elems {
				if string(elems[i]) != string(env.Elements["history"][i]) {
					t.Fatalf("element %d differs", i)
				}
			}
		}
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestEnvelopeErrors: the 400s of hostile bodies (deep nesting, trailing
// data, broken members and elements), byte offset and pointer, as the
// server's own walker answered them before the envelope became a wire
// skim (FuzzEnvelopeAgainstWalker held the two to each other on these
// and fuzzed bodies, then the walker went).
func TestEnvelopeErrors(t *testing.T) {
	for _, c := range []struct{ body, msg, ptr string }{
		{"[]", "the body must be a JSON object", ""},
		{"\"x\"", "the body must be a JSON object", ""},
		{"", "the body must be a JSON object", ""},
		{"{", "invalid JSON at byte 1: expected a member name", ""},
		{"{\"a\"", "invalid JSON at byte 4: expected ':'", ""},
		{"{\"a\":", "invalid JSON at byte 5: unexpected end of input", "/a"},
		{"{\"a\":1", "invalid JSON at byte 6: expected ',' or '}'", ""},
		{"{\"a\":1,}", "invalid JSON at byte 7: expected a member name", ""},
		{"{\"a\" 1}", "invalid JSON at byte 5: expected ':'", ""},
		{"{a:1}", "invalid JSON at byte 1: expected a member name", ""},
		{"{\"a\":1}x", "invalid JSON at byte 7: unexpected data after the object", ""},
		{"{\"a\":1} {}", "invalid JSON at byte 8: unexpected data after the object", ""},
		{`{"history": [` + strings.Repeat("[", 600) + `]}`, "invalid JSON at byte 525: nested too deeply", ""},
		{"{\"history\": [{\"a\": \"unterminated]}", "invalid JSON at byte 19: unterminated string", ""},
		{"{\"history\": [{]}", "invalid JSON at byte 15: expected ',' or ']'", ""},
		{"{\"history\": [1,]}", "invalid JSON at byte 15: unexpected character ']'", "/history"},
		{"{\"history\": [,1]}", "invalid JSON at byte 13: unexpected character ','", "/history"},
		{"{\"history\": [1 2]}", "invalid JSON at byte 15: expected ',' or ']'", ""},
		{"{\"history\": [01]}", "invalid JSON at byte 14: expected ',' or ']'", ""},
		{"{\"history\": [NaN]}", "invalid JSON at byte 13: NaN is not a JSON value", "/history"},
		{"{\"context\": {\"u\": \"\\ud800\"}}", "invalid JSON at byte 19: lone UTF-16 surrogate \\ud800", "/context/u"},
		{"{\"\x80\": []}", "invalid JSON at byte 2: invalid UTF-8 in string", ""},
		{"{\"x\": \"\x01\"}", "invalid JSON at byte 7: control character 0x01 in string", "/x"},
		{"{\"x\": tru}", "invalid JSON at byte 6: unexpected character 't'", "/x"},
		{"{\"x\": 1.}", "invalid JSON at byte 8: unexpected character '}'", "/x"},
		{"{\"history\": [1]]}", "invalid JSON at byte 15: expected ',' or '}'", ""},
		{`{"context": ` + strings.Repeat("[", 201) + `1` + strings.Repeat("]", 201) + `}`, "invalid JSON at byte 213: nesting deeper than the limit of 200", "/context" + strings.Repeat("/0", 200)},
	} {
		_, herr := scanEnvelope([]byte(c.body), []string{"history", "context", "abc"}, "history")
		want := badRequest(CodeSyntax, c.msg, c.ptr)
		if !reflect.DeepEqual(herr, want) {
			t.Errorf("%.60q: got %+v, want %+v", c.body, herr, want)
		}
	}
	// Duplicate members: the last wins, and its elements with it.
	env, herr := scanEnvelope([]byte(`{"history": [1], "history": "s", "abc": 1, "abc": [2], "x": 1, "x": 2}`), []string{"history", "abc"}, "history")
	if herr != nil || string(env.Members["history"]) != `"s"` || env.Elements["history"] != nil || string(env.Members["abc"]) != `[2]` || !slices.Equal(env.Unknown, []string{"x"}) {
		t.Errorf("duplicates: %+v %v", env, herr)
	}
}
