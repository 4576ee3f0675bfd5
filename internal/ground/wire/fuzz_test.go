package wire_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/internal/testkit/strictjson"
)

// FuzzSkipJSON holds Skip to an oracle written apart from it
// (internal/strictjson): it accepts a document exactly when encoding/json
// does, the text is strict (UTF-8, surrogate escapes in pairs) and it
// nests no deeper than the limit, and then it ends where the value does.
// A refusal is an *Error with an offset in the document.
func FuzzSkipJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[1, -0.5e3, true, null, "x"]`, `{"a": {"b": ["c"]}} `, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`,
		"\"\xff\"", `NaN`, `-Infinity`, `[Infinity]`, `{"a" 1}`, `[1,]`, `01`, `"\q"`, `[[[[[[]]]]]]`, ` 1 `, `{"a":1}x`,
	} {
		f.Add([]byte(seed), uint8(4))
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		maxDepth := int(depth%8) + 1
		end, err := wire.Skip("fuzz.json", data, 0, maxDepth)
		rest := []byte(nil)
		if err == nil {
			rest = bytes.TrimLeft(data[end:], " \t\r\n")
		}
		want := strictjson.Valid(data) && strictjson.Depth(data) <= maxDepth
		if got := err == nil && len(rest) == 0; got != want {
			t.Fatalf("Skip accepts=%v (end %d, err %v), the oracle %v, on %q (depth %d)", got, end, err, want, data, maxDepth)
		}
		if err != nil {
			require.LessOrEqual(t, err.Offset, len(data))
		}
	})
}
