package jsonout_test

import (
	"encoding/json"
	"testing"

	"github.com/policycheck/policycheck/internal/ground/jsonout"
)

// TestJoinArray: the elements, as given, in one array that decodes to them.
func TestJoinArray(t *testing.T) {
	for _, tc := range []struct {
		elems [][]byte
		want  string
	}{
		{nil, `[]`},
		{[][]byte{[]byte(`{"a":1}`)}, `[{"a":1}]`},
		{[][]byte{[]byte(`1`), []byte(` "x" `), []byte(`[2]`)}, `[1, "x" ,[2]]`},
	} {
		got := jsonout.JoinArray(tc.elems)
		if string(got) != tc.want {
			t.Errorf("JoinArray(%q) = %s, want %s", tc.elems, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("JoinArray(%q) = %s, not JSON", tc.elems, got)
		}
	}
}
