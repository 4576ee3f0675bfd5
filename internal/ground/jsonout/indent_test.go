package jsonout

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// indentSeeds are JSON values whose strings hold what could end them
// early (escaped quotes after escaped backslashes) and containers that
// are empty, nested or spaced out.
var indentSeeds = []string{
	`{}`, `[]`, `{"a":[]}`, `[{},[],{"b":{}}]`, `"x"`, `12`, `null`,
	`{"q":"a\"b","r":"\\","s":"\\\"","t":"\\\\\"x\\\\","u":"\u00e9 ] } , :"}`,
	` { "a" : [ 1 , 2 ,	{ "b" : null } ] ,
 "c" : true } `,
	`{"tools":["a","b"],"reasons":{"a":{"rule":"x","because":["[",",","{"]}}}`,
}

// randomJSON returns a random JSON value of the given depth: objects,
// arrays (empty ones too), strings with escapes and punctuation, and
// scalars, with whitespace sprinkled between tokens.
func randomJSON(r *rand.Rand, depth int) string {
	ws := func() string { return []string{"", "", " ", "\n  ", "\t"}[r.IntN(5)] }
	switch k := r.IntN(6); {
	case depth > 0 && k == 0:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(strconv.Quote("k"+strconv.Itoa(i)) + ws() + ":" + ws() + randomJSON(r, depth-1))
		}
		return b.String() + ws() + "}"
	case depth > 0 && k == 1:
		var b strings.Builder
		b.WriteString("[" + ws())
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(ws() + "," + ws())
			}
			b.WriteString(randomJSON(r, depth-1))
		}
		return b.String() + "]"
	case k == 2:
		raw, _ := json.Marshal([]string{"a\"b", "c\\", "\\\"", "{,}[:]", "é", "\u2028", "\\\\"}[r.IntN(7)])
		return string(raw)
	case k == 3:
		return []string{"true", "false", "null"}[r.IntN(3)]
	}
	return strconv.FormatFloat(r.NormFloat64()*1e3, 'g', -1, 64)
}

// TestIndentIsJSONIndent: indent writes what json.Indent writes, for the
// seeds and a thousand random values.
func TestIndentIsJSONIndent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := append([]string{}, indentSeeds...)
	for range 1000 {
		cases = append(cases, randomJSON(r, 4))
	}
	for _, c := range cases {
		requireIndentsAsJSON(t, []byte(c))
	}
	_, ok := indent(nil, []byte(`{"a":"b`))
	require.False(t, ok, "an unterminated string")
}

func requireIndentsAsJSON(t *testing.T, src []byte) {
	t.Helper()
	var want bytes.Buffer
	if json.Indent(&want, src, "", "  ") != nil {
		return
	}
	got, ok := indent([]byte("prefix:"), src)
	require.True(t, ok, "%s", src)
	require.Equal(t, "prefix:"+want.String(), string(got), "%s", src)
}

// FuzzIndent holds indent to json.Indent on every valid JSON value.
func FuzzIndent(f *testing.F) {
	for _, s := range indentSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if json.Valid(src) {
			requireIndentsAsJSON(t, src)
		}
	})
}
