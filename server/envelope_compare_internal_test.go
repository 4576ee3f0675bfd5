package server

import (
	"reflect"
	"strings"
	"testing"
)

// compareEnvelopes requires the wire skim and the server's old walker to
// give body the same answer.
func compareEnvelopes(t *testing.T, body []byte, hooks arrayHooks) {
	t.Helper()
	known := []string{"history", "context", "abc"}
	for _, arrays := range [][]string{nil, {"history"}} {
		old, oerr := scanEnvelopeWith(body, known, hooks, arrays...)
		env, nerr := skimEnvelope(body, known, hooks, arrays...)
		if !reflect.DeepEqual(oerr, nerr) {
			t.Fatalf("%q (arrays %v): old %+v, new %+v", body, arrays, oerr, nerr)
		}
		if oerr != nil {
			continue
		}
		if !reflect.DeepEqual(old.members, env.Members) || !reflect.DeepEqual(old.elements, env.Elements) ||
			!reflect.DeepEqual(old.unknown, env.Unknown) || old.arrStart != env.ArrStart || old.lastEnd != env.LastEnd || old.resumedN != env.ResumedN {
			t.Fatalf("%q (arrays %v): old %+v, new %+v", body, arrays, old, env)
		}
	}
}

func FuzzEnvelopeAgainstWalker(f *testing.F) {
	for _, c := range hostileEnvelopes() {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		compareEnvelopes(t, body, arrayHooks{})
		compareEnvelopes(t, body, arrayHooks{resume: func(arr []byte) int {
			if i := strings.IndexByte(string(arr), ','); i > 0 {
				return i
			}
			return 0
		}})
	})
}

func hostileEnvelopes() []string {
	return []string{
		`{}`, ` { } `, `[]`, `"x"`, ``, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1}x`, `{"a":1} {}`,
		`{"history": [` + strings.Repeat("[", 600) + `]}`, `{"context": ` + strings.Repeat("[", 201) + strings.Repeat("]", 201) + `}`,
		`{"context": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, `{"history": [1, ` + strings.Repeat("[", 200) + `1` + strings.Repeat("]", 200) + `]}`,
		`{"history": "s", "history": [2]}`, `{"history": [1], "history": "s"}`, `{"history": [1], "history": [2, 3]}`, `{"abc": 1, "abc": 2, "x": 1, "x": 2}`,
		`{"history": [{"a": "x\\\"]}"}, ["\\\\"], "]"]}`, `{"history": [{"a": "unterminated]}`, `{"history": [{]}`, `{"history": [1,]}`, `{"history": [,1]}`,
		`{"history": [1 2]}`, `{"history": [01]}`, `{"history": [NaN]}`, `{"history": [{"a": NaN}]}`, `{"context": {"u": "\ud800"}}`, "{\"\x80\": []}",
		"{\"x\": \"\x01\"}", `{"a\u0062c": "x\n"}`, `{"a\/b~": 1}`, `{"history": [{"kind": "request"}]   ,  "context": {}}`, `{"history": [  ]}`,
		`{"history": [ {} , {} ] }`, `{"history": null}`, `{"x": tru}`, `{"x": 1.}`, `{"history": [1]]}`, `{"history": {"a": [1]}}`,
		`{"context": ` + strings.Repeat("[", 201) + `1` + strings.Repeat("]", 201) + `}`, `{"history": [` + strings.Repeat("[", 200) + `1` + strings.Repeat("]", 200) + `, 1]}`,
	}
}

func TestEnvelopeAgainstWalker(t *testing.T) {
	for _, c := range hostileEnvelopes() {
		compareEnvelopes(t, []byte(c), arrayHooks{})
	}
}
