package loader

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// skipStringByByte is skipString read one byte at a time, as the grammar
// says it: the oracle the word-at-a-time reading is held to. Escapes are
// checked by the scanner's own escape, which this does not test.
func skipStringByByte(d *scanner) (s, e int, esc bool, err *Error) {
	data := d.data
	i := d.i + 1
	s = i
	for {
		if i >= len(data) {
			d.i = i
			return 0, 0, false, d.syntax("invalid JSON: unterminated string")
		}
		c := data[i]
		switch {
		case c == '"':
			d.i = i + 1
			return s, i, esc, nil
		case c == '\\':
			esc = true
			if i, err = d.escape(i); err != nil {
				return 0, 0, false, err
			}
		case c < 0x20:
			d.i = i
			return 0, 0, false, d.syntax("invalid JSON: control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				d.i = i
				return 0, 0, false, d.syntax("invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// TestSkipStringIsByteByByte holds skipString to the byte-by-byte
// reading on a million random strings over the bytes where it could go
// wrong: quotes, backslashes and escapes, control characters, the bytes of
// valid and broken UTF-8 sequences, and 0x7f and 0xff next to the word
// tricks' edges. Each string starts at a random offset so that every byte
// falls at every place of a word, and each ends either before the data
// does or where it does. The extent, the escape flag, the offset after it
// and any error (message, offset, line and column) must all agree.
func TestSkipStringIsByteByByte(t *testing.T) {
	alphabet := [][]byte{
		{'"'}, {'\\'}, []byte(`\"`), []byte(`\\`), []byte(`\n`), []byte(`\u00e9`), []byte(`\ud83d\ude00`),
		[]byte(`\ud83d`), []byte(`\udc00`), []byte(`\x`), []byte(`\u12`),
		{0x00}, {0x1f}, {'\n'}, {0x20}, {0x7f}, {'a'}, {'!'}, {']'}, {'#'}, {'!' + 1},
		[]byte("é"), []byte("€"), []byte("😀"), {0xc3}, {0xe2, 0x82}, {0x80}, {0xff}, {0xed, 0xa0, 0x80},
		[]byte("plain ascii words"),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	for k := 0; k < n; k++ {
		data := make([]byte, 0, 64)
		for range rng.IntN(8) {
			data = append(data, 'x')
		}
		start := len(data)
		data = append(data, '"')
		for range rng.IntN(12) {
			data = append(data, alphabet[rng.IntN(len(alphabet))]...)
		}
		if rng.IntN(4) > 0 {
			data = append(data, '"')
			for range rng.IntN(10) {
				data = append(data, ',')
			}
		}
		got, want := &scanner{data: data, i: start}, &scanner{data: data, i: start}
		s1, e1, esc1, err1 := got.skipString()
		s2, e2, esc2, err2 := skipStringByByte(want)
		require.Equal(t, [3]any{s2, e2, esc2}, [3]any{s1, e1, esc1}, "%q", data)
		require.Equal(t, want.i, got.i, "%q", data)
		require.Equal(t, err2, err1, "%q", data)
	}
}
