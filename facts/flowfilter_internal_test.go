package facts

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestFoldIsCoarserThanTheNormalisations: the filter's fold and
// lower-casing (appendFold, appendLower) rest on unicode.ToLower being
// idempotent and never making a space or a hyphen of another rune, and
// on lower-casing at most tripling a rune's bytes (skipBound).
func TestFoldIsCoarserThanTheNormalisations(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		l := unicode.ToLower(r)
		require.Equal(t, l, unicode.ToLower(l), "%U", r)
		if l == ' ' || l == '-' {
			require.Equal(t, r, l, "%U", r)
		}
		require.LessOrEqual(t, utf8.RuneLen(l), 3*utf8.RuneLen(r), "%U", r)
	}
	require.Equal(t, "kelvin", string(appendFold(nil, []byte("\u212Aelvin"))))
	require.Equal(t, "de89370400440532013000", string(appendFold(nil, []byte("DE89 3704-0044 0532 0130 00"))))
}

// FuzzSkipBound: what indexing a content adds to the cap's count (every
// string of one byte or more, with its tokens) is at most its skipBound
// and at most its fastBound.
func FuzzSkipBound(f *testing.F) {
	for _, s := range []string{
		`{"k":"a@b.c@d.e@f.g"}`,
		`{"k":"https://ȺȺȺȺ.example/ȺȺ http://Ⱥ"}`,
		`{"k":"{\"a\":\"{\\\"b\\\":[1.2345e-300,\\\"x y=z\\\"]}\"}"}`,
		`[12345.678901234567,1e-320,"DE89 3704 0044 0532 0130 00"]`,
		`{"k":"  \u005b\"x: y\", \"z\"]"}`,
		`"line one\nkey: value\nrun=val 1-2-3-4-5"`,
		`{"k":"\n {\"a\":[\"b\"]}","l":"\t[1,2]","m":" \u00a0{\"x\":1}"}`,
		`{"k":"€ [\"nested after a non-ASCII space\"]","l":["{\"m\":\"n\"}"]}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, content []byte, tokens bool) {
		if !utf8.Valid(content) || len(content) > 1<<12 {
			return
		}
		x := newFlowIndex(Options{Flows: true, FlowTokens: tokens, FlowMinLength: 1})
		x.addPart(&Part{Kind: ToolReturn, ToolName: "t", Content: content}, Position{}, nil)
		require.False(t, x.truncated)
		require.LessOrEqual(t, x.used, skipBound(content, tokens), "%q", content)
		require.LessOrEqual(t, x.used, fastBound(content, tokens), "%q", content)
	})
}
