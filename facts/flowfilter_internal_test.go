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
		if unicode.ToLower(l) != l || (l == ' ' || l == '-') && r != l || utf8.RuneLen(l) > 3*utf8.RuneLen(r) {
			t.Fatalf("%U lower-cases to %U", r, l)
		}
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
		x.addPart(&Part{Kind: ToolReturn, ToolName: "t", Content: content}, Position{}, nil, nil)
		require.False(t, x.truncated)
		require.LessOrEqual(t, x.used, skipBound(content, tokens), "%q", content)
		require.LessOrEqual(t, x.used, fastBound(content, tokens), "%q", content)
	})
}

// TestFlowFilterSkips: the filter passes a return that holds a leaf's
// string, identifier or number, and skips one that holds none, so that
// the comparisons with the full index are not vacuous; a content it
// cannot read as the walk does passes.
func TestFlowFilterSkips(t *testing.T) {
	args := []byte(`{"note":"please use sk-live-12345678 for this","to":"Ada@Example.com","iban":"DE89 3704 0044 0532 0130 00","url":"https://kelvin.example/x","n":12345.67}`)
	for _, tokens := range []bool{false, true} {
		f := newFlowFilter(Options{Flows: true, FlowTokens: tokens}, []Call{{Args: args}}, []any{ArgsValue(args)})
		require.NotNil(t, f)
		pass := func(content string) bool { return f.pass([]byte(content)) }
		require.True(t, pass(`{"key":"sk-live-12345678"}`))
		require.True(t, pass(`{"key":"sk-live-\u0031\u00322345678"}`), "a \\u escape of ASCII")
		require.True(t, pass(`{"amount":1.234567e4}`))
		require.True(t, pass(`{"amount":123.4567}`))
		require.True(t, pass("{\"k\":\"\xff invalid\"}"), "not UTF-8")
		require.True(t, pass(`{"k":"{\"a\":\"x\\\\y\"}"}`), "a backslash once decoded")
		require.True(t, pass(`{"k":"\ud800 lone"}`), "a lone surrogate")
		require.False(t, pass(`{"key":"nothing of it here at all","n":2024}`))
		require.False(t, pass(`{"amount":12355.67}`))
		require.Equal(t, tokens, pass(`{"from":"ADA@example.COM"}`), "an email, re-cased")
		require.Equal(t, tokens, pass(`{"acct":"DE89-3704-0044-0532-0130-00"}`), "an IBAN, other separators")
		require.Equal(t, tokens, pass(`{"link":"see https://\u212Aelvin.example/x"}`), "a URL, its host with the Kelvin sign")
		require.Equal(t, tokens, pass(`{"text":"one line\nfor this and more"}`), "a run inside the leaf")
	}
}
