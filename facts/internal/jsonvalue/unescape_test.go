package jsonvalue

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendUnescaped: every escape is decoded once, as encoding/json
// decodes the same bytes quoted; what no JSON string holds (an invalid
// escape, a lone surrogate escape, a cut escape) is refused.
func TestAppendUnescaped(t *testing.T) {
	for _, in := range []string{
		``, `plain`, `a\"b`, `\\`, `\\n`, `\/`, `\b\f\n\r\t`, `\u00e9t\u00C9`,
		`\ud83d\ude00`, `x\u0041\u005c\u006e`, `héllo \u4e16`,
	} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(`"`+in+`"`), &want), in)
		got, ok := AppendUnescaped([]byte("dst:"), []byte(in))
		require.True(t, ok, in)
		require.Equal(t, "dst:"+want, string(got), in)
	}
	// A quote is any other byte here: the bytes are not a quoted string.
	got, ok := AppendUnescaped(nil, []byte(`"a" \"b\"`))
	require.True(t, ok)
	require.Equal(t, `"a" "b"`, string(got))

	for _, in := range []string{
		`\`, `a\`, `\x`, `\u12`, `\u12g4`, `\ud83d`, `\ud83dx\ude00`, `\ude00`,
		`\ud83d\u0041`, `\ud83d\ud83d`, `\ud83d\ude0`,
	} {
		_, ok := AppendUnescaped(nil, []byte(in))
		require.False(t, ok, in)
	}
}
