package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The oracle of the differential test and the fuzz target below: the
// walk the index's semantics are defined by, walkValue over the value
// encoding/json decodes from the content (walk.go keeps it, as the
// fallback for what the wire scanner refuses).

type oracleLeaf struct {
	S            string
	Num, Inexact bool
}

// oracleFlowLeaves is whether the content is indexed and the leaves
// walkValue visits in it, in order.
func oracleFlowLeaves(content []byte, minLen int) ([]oracleLeaf, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	out := []oracleLeaf{}
	walkValue(v, 0, minLen, func(s string, isNum, inexact bool) bool {
		out = append(out, oracleLeaf{s, isNum, inexact})
		return true
	})
	return out, true
}

// scannedFlowLeaves is the walk under test, its leaves as the oracle's.
func scannedFlowLeaves(w *Walker, content []byte) ([]oracleLeaf, bool) {
	if !w.Walk(content) {
		return nil, false
	}
	out := []oracleLeaf{}
	for i := range w.leaves {
		out = append(out, oracleLeaf{string(w.Bytes(&w.leaves[i])), w.leaves[i].num, w.leaves[i].inexact})
	}
	return out, true
}

// checkFlowWalk compares the two walks of content.
func checkFlowWalk(t testing.TB, w *Walker, content []byte) {
	t.Helper()
	want, wantOK := oracleFlowLeaves(content, w.minLen)
	got, gotOK := scannedFlowLeaves(w, content)
	if wantOK != gotOK || !slices.Equal(want, got) {
		t.Fatalf("content %q, minLen %d:\nold (%v) %+v\nnew (%v) %+v", content, w.minLen, wantOK, want, gotOK, got)
	}
}

// flowContentGen writes random JSON contents, valid and not, with what
// the two walks could read differently.
type flowContentGen struct{ rnd *rand.Rand }

var flowGenStrings = []string{
	"abcdefgh", "abcdefghij", "ab", "", "hello world", "x/y~z", "https://example.com/a?b=c",
	`with \"quote\"`, `back\\slash`, `new\nline\ttab`, `\u00e9t\u00e9 caf\u00e9`, "été café",
	`\ud83d\ude00 emoji`, "😀 raw emoji", `\u0000nul`, `\/slash`, `lone \ud800 hi`, `lone \udc00 lo`,
	`\ud800\u0041 bad pair`, "bad utf8 \xff\xfe!", "nbsp\u00a0x", `\u00a0{"a":1}`,
	"12345", "   {\"k\":1}", `ABCDEFGHIJKLMNOP`, `\b\f\r`,
}

var flowGenNumbers = []string{
	"0", "-0", "1", "12345", "123456789", "4999.99", "0.031415", "1e21", "1E5", "-12345.678e-3",
	"1e400", "-1e400", "123456789012345678901234567890", "0.000012345", "2024", "1.0000000000000001",
}

func (g *flowContentGen) str() string {
	if g.rnd.IntN(6) == 0 {
		// A string that holds JSON, itself a generated value.
		inner := g.value(g.rnd.IntN(3))
		if g.rnd.IntN(4) == 0 {
			inner = []string{" ", "\n", "\u00a0", "\u0085"}[g.rnd.IntN(4)] + inner
		}
		b, _ := json.Marshal(inner)
		if g.rnd.IntN(3) == 0 {
			// json.Marshal escapes <, >, & and invalid UTF-8; write some
			// escapes by hand too.
			return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(inner) + `"`
		}
		return string(b)
	}
	s := flowGenStrings[g.rnd.IntN(len(flowGenStrings))]
	if g.rnd.IntN(3) == 0 {
		s += flowGenStrings[g.rnd.IntN(len(flowGenStrings))]
	}
	return `"` + s + `"`
}

func (g *flowContentGen) value(depth int) string {
	k := g.rnd.IntN(10)
	if depth <= 0 && k >= 6 {
		k = g.rnd.IntN(6)
	}
	switch k {
	case 0, 1, 2:
		return g.str()
	case 3:
		return flowGenNumbers[g.rnd.IntN(len(flowGenNumbers))]
	case 4:
		return []string{"true", "false", "null"}[g.rnd.IntN(3)]
	case 5:
		return g.str()
	case 6, 7:
		var b strings.Builder
		b.WriteByte('[')
		for i := range g.rnd.IntN(4) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(g.value(depth - 1))
		}
		b.WriteByte(']')
		return b.String()
	default:
		var b strings.Builder
		b.WriteString("{ ")
		var keys []string
		for i := range g.rnd.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			var key string
			if len(keys) > 0 && g.rnd.IntN(4) == 0 {
				key = keys[g.rnd.IntN(len(keys))] // a duplicate
			} else {
				key = g.str()
			}
			keys = append(keys, key)
			b.WriteString(key)
			b.WriteString(" :")
			b.WriteString(g.value(depth - 1))
		}
		b.WriteString("}")
		return b.String()
	}
}

// content returns a content: a value, sometimes broken or followed by
// something.
func (g *flowContentGen) content() []byte {
	c := []byte(g.value(g.rnd.IntN(5)))
	switch g.rnd.IntN(12) {
	case 0: // truncated
		c = c[:g.rnd.IntN(len(c)+1)]
	case 1: // a byte changed
		if len(c) > 0 {
			const bytes = "{}[]\",:\\ x0\xff"
			c[g.rnd.IntN(len(c))] = bytes[g.rnd.IntN(len(bytes))]
		}
	case 2: // trailing data
		c = append(c, []string{" ", " x", "x", "{}", " 1", "\n\"s\""}[g.rnd.IntN(6)]...)
	case 3: // leading space
		c = append([]byte(" \n\t"), c...)
	}
	return c
}

// deepFlowContents are nestings around the limits: the scanner's, and
// encoding/json's 10,000 levels, in a content and in a string of it.
func deepFlowContents() [][]byte {
	var out [][]byte
	for _, n := range []int{9998, 9999, 10000, 10001} {
		for _, inner := range []string{"", `"abcdefghij"`} {
			v := strings.Repeat("[", n) + inner + strings.Repeat("]", n)
			out = append(out, []byte(v))
			s, _ := json.Marshal(v)
			out = append(out, []byte(`{"deep": `+string(s)+`, "zzzzzzzzz": 1}`))
		}
	}
	obj := strings.Repeat(`{"abcdefghi":`, 10000) + `"xyzxyzxyz"` + strings.Repeat("}", 10000)
	out = append(out, []byte(obj), []byte(obj[len(`{"abcdefghi":`):len(obj)-1]))
	return out
}

// TestFlowWalkMatchesDecodedWalk is the differential test of the
// scanner's walk of a return's content: on generated contents (escapes,
// unicode, invalid UTF-8 and lone surrogates, JSON inside strings,
// duplicate and unsorted keys, deep nesting, invalid JSON, trailing
// data) it emits the leaves the walk of encoding/json's value emitted,
// in the same order (which decides where the index's cap truncates),
// and skips the same contents.
func TestFlowWalkMatchesDecodedWalk(t *testing.T) {
	g := &flowContentGen{rnd: rand.New(rand.NewPCG(33, 1))}
	seen := map[string]int{}
	for i := range 20000 {
		w := &Walker{minLen: 1 + i%10}
		c := g.content()
		checkFlowWalk(t, w, c)
		_, ok := oracleFlowLeaves(c, w.minLen)
		seen[fmt.Sprint("valid=", ok)]++
		if ok && !w.value(c, 0, len(c), false, 0) {
			seen["read by encoding/json, not the scanner"]++
		}
		if ok && len(w.leaves) > 1 {
			seen["several leaves"]++
		}
	}
	for _, c := range deepFlowContents() {
		checkFlowWalk(t, &Walker{minLen: 4}, c)
	}
	// Each kind of content was generated often enough to mean something.
	require.Greater(t, seen["valid=true"], 10000, "%v", seen)
	require.Greater(t, seen["valid=false"], 1000, "%v", seen)
	require.Greater(t, seen["read by encoding/json, not the scanner"], 500, "%v", seen)
	require.Greater(t, seen["several leaves"], 5000, "%v", seen)
}

// TestFlowWalkReusesScratch: one walker walks many contents, as an index
// does, the leaves of each its own.
func TestFlowWalkReusesScratch(t *testing.T) {
	g := &flowContentGen{rnd: rand.New(rand.NewPCG(33, 2))}
	w := &Walker{minLen: 3}
	for range 3000 {
		checkFlowWalk(t, w, g.content())
	}
}

// FuzzFlowWalk compares the two walks on any content.
func FuzzFlowWalk(f *testing.F) {
	g := &flowContentGen{rnd: rand.New(rand.NewPCG(33, 3))}
	for range 200 {
		f.Add(g.content(), uint8(1+g.rnd.IntN(10)))
	}
	f.Fuzz(func(t *testing.T, content []byte, minLen uint8) {
		checkFlowWalk(t, &Walker{minLen: 1 + int(minLen%16)}, content)
	})
}

// TestFloatExact: a number is exact when its decimal value is its
// float's shortest form, however it is written.
func TestFloatExact(t *testing.T) {
	for _, tc := range []struct {
		note, n string
		exact   bool
	}{
		{"an integer", "12345", true},
		{"with a point", "12345.0", true},
		{"with an exponent", "1.2345e4", true},
		{"leading zeros of a fraction", "0.00012345", true},
		{"negative", "-12345.5", true},
		{"zero", "0", true},
		{"negative zero", "-0.0e5", true},
		{"the shortest form past 2^53", "1234567890123456800", true},
		{"the same, written otherwise", "1.2345678901234568E+18", true},
		{"past 2^53, not the shortest form", "1234567890123456789", false},
		{"2^53 + 1", "9007199254740993", false},
		{"a decimal past 17 digits", "12345.000000000000001", false},
		{"underflows to 0", "1.2345e-400", false},
		{"a huge exponent", "1.2345e-9999999999", false},
	} {
		f, err := strconv.ParseFloat(tc.n, 64)
		require.NoError(t, err, tc.note)
		require.Equal(t, tc.exact, floatExact(tc.n, strconv.FormatFloat(f, 'e', -1, 64)), tc.note)
		if shortDecimal(tc.n) {
			require.True(t, tc.exact, "%s: short, so exact", tc.note)
		}
	}
	// shortDecimal's claim: a decimal of at most 15 characters without
	// an exponent is exact.
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		digits := strconv.FormatUint(rnd.Uint64()%1_000_000_000_000_000, 10)
		n := digits[:1+rnd.IntN(len(digits))]
		if p := rnd.IntN(len(n) + 1); p > 0 && p < len(n) {
			n = n[:p] + "." + n[p:]
		}
		if rnd.IntN(2) == 0 {
			n = "-" + n
		}
		if !shortDecimal(n) {
			continue
		}
		f, err := strconv.ParseFloat(n, 64)
		require.NoError(t, err)
		require.True(t, floatExact(n, strconv.FormatFloat(f, 'e', -1, 64)), n)
	}
}
