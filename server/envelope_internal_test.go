package server

import (
	"encoding/json"
	"slices"
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
		if !sameSet(unknown, env.unknown) {
			t.Fatalf("unknown members: scanner %q, encoding/json %q", env.unknown, unknown)
		}
		for _, k := range []string{"history", "context", "abc"} {
			want, ok := obj[k]
			got, gok := env.members[k]
			if ok != gok || (ok && string(want) != string(got)) {
				t.Fatalf("member %s: scanner %q, encoding/json %q", k, got, want)
			}
		}
		var elems []json.RawMessage
		if json.Unmarshal(obj["history"], &elems) == nil && obj["history"] != nil && string(obj["history"]) != "null" {
			if len(elems) != len(env.elements["history"]) {
				t.Fatalf("history elements: scanner %d, encoding/json %d", len(env.elements["history"]), len(elems))
			}
			for i := range elems {
				if string(elems[i]) != string(env.elements["history"][i]) {
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
