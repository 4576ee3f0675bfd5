package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// TestSkimArraySplitsAsEncodingJSON: the elements of a valid array are
// the ones encoding/json splits it into, and what is not an array, or
// not JSON, is refused.
func TestSkimArraySplitsAsEncodingJSON(t *testing.T) {
	for _, c := range []string{`[]`, ` [ 1 , "a]" , {"b": [2, "\""]}, null, [[]] ] `, `[{"kind": "request"}]`} {
		elems, _, err := wire.SkimArray("t", []byte(c), 0, 200)
		var want []json.RawMessage
		if jerr := json.Unmarshal([]byte(c), &want); jerr != nil || err != nil || len(want) != len(elems) {
			t.Fatalf("%s: %v %v %d/%d", c, jerr, err, len(elems), len(want))
		}
		for i := range want {
			if string(want[i]) != string(elems[i]) {
				t.Fatalf("%s: element %d: %s, want %s", c, i, elems[i], want[i])
			}
		}
	}
	for _, c := range []string{`{}`, `1`, `[1,]`, `[1 2]`, `["a]`, `[01]`} {
		if _, _, err := wire.SkimArray("t", []byte(c), 0, 200); err == nil {
			t.Errorf("%s: accepted", c)
		}
	}
}

// TestValidIsStrict: Valid is Skip over the whole input: what
// encoding/json reads as U+FFFD, and the number extensions, are not JSON.
func TestValidIsStrict(t *testing.T) {
	for c, want := range map[string]bool{` {"a": [1, 2.5e3]} `: true, `[1] x`: false, `[NaN]`: false, "[\"\xff\"]": false,
		`["\ud800"]`: false, `[[[]]]`: true, `[[[1]]]`: false} {
		if got := wire.Valid([]byte(c), 2); got != want {
			t.Errorf("%q: %v, want %v", c, got, want)
		}
	}
}
