package strictjson_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/strictjson"
)

func TestValid(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"a": "b"}`: true, `"\ud83d\ude00"`: true, `"\\ud800"`: true, `"é"`: true, ` [1, 2] `: true,
		`"\ud800"`: false, `"\udc00"`: false, `"\ud800\u0041"`: false, `"\ud800x"`: false, "\"\xff\"": false,
		`NaN`: false, `{"a": 1} x`: false, `[`: false,
	} {
		require.Equal(t, want, strictjson.Valid([]byte(doc)), doc)
	}
}

func TestDepth(t *testing.T) {
	for doc, want := range map[string]int{
		`1`: 0, `[]`: 0, `{}`: 0, `[1]`: 1, `[[]]`: 1, `{"a": [[{}]]}`: 3, `{"a": [[{"b": 1}]]}`: 4,
		`["[[[", {"b": "]]"}]`: 2, `"\"[["`: 0, `[["\\"], []]`: 2, `[[], [[]], 1]`: 2,
		"[ \t\r\n]": 0, "{\n}": 0, "[[ ], {\t}]": 1, `{"a": 1, "b": {}}`: 1,
	} {
		require.Equal(t, want, strictjson.Depth([]byte(doc)), doc)
	}
}
