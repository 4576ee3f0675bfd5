//go:build unix

package loader_test

// A prototype for issue 36, kept as a test so that its measurement can be
// repeated; nothing in the package uses it. It is stage 1 of a
// simdjson-style decoder written in portable Go: one pass over the bytes,
// 64 at a time, builds bitmaps of quotes, backslashes and structural
// characters with 64-bit word tricks (no SIMD: Go's compiler emits none),
// works out which bytes are inside strings by a prefix XOR of the
// unescaped quotes, validates what a string may hold (no control
// characters, escapes well formed, UTF-8 valid) and writes the offsets of
// every structural character outside strings and of every string's
// quotes into an index. A stage 2 would then walk the index and decode
// only the members facts read, skipping the others' bytes without looking
// at them again. BenchmarkStructuralIndex measures stage 1 alone, which
// bounds the design from below, against loader.DecodeArray and
// wire.Skip (validation alone) on the same generated history; BENCHMARKS.md, "Against
// the floor (issue 36)", sums up what it showed, and its appendix
// (docs/benchmarks-history/2026-12-03.md) has the measurements.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/loader"
)

const (
	protoLSB = 0x0101010101010101
	protoMSB = 0x8080808080808080
	protoLow = 0x7f7f7f7f7f7f7f7f
)

// eq8 has the high bit of each byte of w that equals the byte c (exact,
// no false alarms: the low seven bits are summed without carrying out).
func eq8(w, c uint64) uint64 {
	x := w ^ c
	return ^(((x & protoLow) + protoLow) | x) & protoMSB
}

// pack8 moves the high bit of each byte of m (others zero) to bits 0-7.
func pack8(m uint64) uint64 { return ((m >> 7) * 0x0102040810204080) >> 56 }

// structIndex is stage 1: it appends to idx the offsets of the unescaped
// quotes and of the structural characters outside strings ({ } [ ] : ,),
// in order, and reports the first fault of a string's contents.
func structIndex(data []byte, idx []uint32) ([]uint32, error) {
	return structIndexBy(data, idx, classifySWAR)
}

// classifySWAR returns the bitmaps of b[:64] (bit i for byte i): quotes,
// backslashes, structural characters, ASCII control characters and
// non-ASCII bytes, from eight 64-bit words.
func classifySWAR(b []byte) (quote, bs, st, ctl, hi uint64) {
	b = b[:64]
	for k := 0; k < 64; k += 8 {
		w := binary.LittleEndian.Uint64(b[k:])
		quote |= pack8(eq8(w, protoLSB*'"')) << k
		w20 := w | protoLSB*0x20
		s := eq8(w20, protoLSB*'{') | eq8(w20, protoLSB*'}') | eq8(w, protoLSB*':') | eq8(w, protoLSB*',')
		st |= pack8(s) << k
		if x := eq8(w, protoLSB*'\\'); x != 0 {
			bs |= pack8(x) << k
		}
		// Bytes below 0x20 (ASCII ones only; high bytes go to hi).
		if c := ^(((w & protoLow) + protoLSB*0x60) | w) & protoMSB; c != 0 {
			ctl |= pack8(c) << k
		}
		if h := w & protoMSB; h != 0 {
			hi |= pack8(h) << k
		}
	}
	return
}

// structIndexBy is structIndex with the classification of each 64 bytes
// given.
func structIndexBy(data []byte, idx []uint32, classify func(b []byte) (quote, bs, st, ctl, hi uint64)) ([]uint32, error) {
	var inStr uint64   // all ones when the previous block ended inside a string
	var escNext uint64 // 1 when the previous block ended with an escaping backslash
	utfDone := 0       // UTF-8 checked up to here
	var block [64]byte // the tail, padded with spaces
	for base := 0; base < len(data); base += 64 {
		b := data[base:]
		if len(b) < 64 {
			n := copy(block[:], b)
			for i := n; i < 64; i++ {
				block[i] = ' '
			}
			b = block[:]
		}
		quote, bs, st, ctl, hi := classify(b)
		// Escaped bytes: the byte after a backslash that is not itself
		// escaped. Backslashes are rare, so a loop over them.
		escaped := escNext
		escNext = 0
		for m := bs &^ escaped; m != 0; {
			i := bits.TrailingZeros64(m)
			if i == 63 {
				escNext = 1
				break
			}
			escaped |= 1 << (i + 1)
			m &^= 3 << i // this backslash and the byte it escapes
		}
		q := quote &^ escaped
		// Inside a string, opening quote included: a prefix XOR.
		x := q
		x ^= x << 1
		x ^= x << 2
		x ^= x << 4
		x ^= x << 8
		x ^= x << 16
		x ^= x << 32
		x ^= inStr
		inStr = uint64(int64(x) >> 63)
		if ctl&x != 0 {
			return idx, fmt.Errorf("control character in a string at %d", base+bits.TrailingZeros64(ctl&x))
		}
		if e := bs &^ escaped & x; e != 0 {
			// An escaping backslash: check what it escapes.
			for m := e; m != 0; m &= m - 1 {
				i := base + bits.TrailingZeros64(m)
				if i+1 >= len(data) {
					return idx, errors.New("unterminated string")
				}
				switch data[i+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					if i+6 > len(data) || !hex4ok(data[i+2:i+6]) {
						return idx, fmt.Errorf("bad \\u escape at %d", i)
					}
				default:
					return idx, fmt.Errorf("bad escape at %d", i)
				}
			}
		}
		if hi != 0 {
			// UTF-8, rune by rune from each non-ASCII byte not yet checked.
			for m := hi; m != 0; m &= m - 1 {
				i := base + bits.TrailingZeros64(m)
				if i < utfDone {
					continue
				}
				r, size := utf8.DecodeRune(data[i:])
				if r == utf8.RuneError && size <= 1 {
					return idx, fmt.Errorf("invalid UTF-8 at %d", i)
				}
				utfDone = i + size
			}
		}
		for m := (st &^ x) | q; m != 0; m &= m - 1 {
			idx = append(idx, uint32(base+bits.TrailingZeros64(m)))
		}
	}
	if inStr != 0 {
		return idx, errors.New("unterminated string")
	}
	// The padding's spaces are never indexed.
	return idx, nil
}

func hex4ok(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// naiveIndex is structIndex byte by byte, the reference it is tested on.
func naiveIndex(data []byte) []uint32 {
	var idx []uint32
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
			idx = append(idx, uint32(i))
		case !in && (c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ','):
			idx = append(idx, uint32(i))
		}
	}
	return idx
}

// TestStructuralIndex holds the prototype to the byte-by-byte reference on
// the generated histories and on strings made of backslashes and quotes
// across the 64-byte blocks' edges, and checks that it refuses what a
// string may not hold.
func TestStructuralIndex(t *testing.T) {
	inputs := [][]byte{benchHistory(100), benchHistory(1000)}
	for n := 0; n < 70; n++ {
		for _, unit := range []string{`\\`, `\"`, `\\\"`, `é`, `a`} {
			s := `{"k":["`
			for range n {
				s += unit
			}
			s += `",{"x":1}],"y":"\u00e9\n"}`
			inputs = append(inputs, []byte(s))
		}
	}
	for _, in := range inputs {
		got, err := structIndex(in, nil)
		if err != nil {
			t.Fatalf("%.60q: %v", in, err)
		}
		if want := naiveIndex(in); !slices.Equal(got, want) {
			t.Fatalf("%.60q: index differs from the reference (%d against %d entries)", in, len(got), len(want))
		}
		if _, err := wire.Skip("t.json", in, 0, 1000); err != nil {
			t.Fatalf("%.60q is not valid JSON: %v", in, err)
		}
	}
	for _, bad := range []string{"[\"a\x01\"]", `["\x"]`, `["\u12g4"]`, "[\"\xff\"]", "[\"\xe2\x82\"]", `["abc`} {
		if _, err := structIndex([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// BenchmarkStructuralIndex measures stage 1 on the generated 1,000-message
// history beside the decode it would replace and the scanner's validation
// alone, on one goroutine. For instruction counts, run it under callgrind
// collecting inside one function, e.g.
//
//	go test -c -o /tmp/loader.test ./loader
//	valgrind --tool=callgrind --toggle-collect='*structIndex' /tmp/loader.test -test.run XXX -test.bench 'StructuralIndex/stage=index' -test.benchtime 20x
func BenchmarkStructuralIndex(b *testing.B) {
	data := append(append([]byte{}, benchHistory(1000)...), '}')
	lim := benchLimits()
	idx := make([]uint32, 0, len(data)/4)
	b.Run("stage=index", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		defer cputime.PerOp(b)()
		for b.Loop() {
			var err error
			if idx, err = structIndex(data[:len(data)-1], idx[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(idx)), "entries")
	})
	b.Run("stage=skip", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		defer cputime.PerOp(b)()
		for b.Loop() {
			if _, err := wire.Skip("bench.json", data[:len(data)-1], 0, 1000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stage=decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		defer cputime.PerOp(b)()
		for b.Loop() {
			if _, err := loader.DecodeArray("bench.json", data, lim, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
