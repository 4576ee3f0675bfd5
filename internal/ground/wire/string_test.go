package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
)

// stringStopByByte is StringStop read one byte at a time: the oracle the
// word-at-a-time reading is held to.
func stringStopByByte(b []byte, i int) int {
	for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' && b[i] < 0x80 {
		i++
	}
	return i
}

// TestStringStopIsByteByByte holds StringStop to the byte-by-byte reading
// on a million random strings over the bytes where the word tricks could
// go wrong: quotes, backslashes, control characters, 0x1f and 0x20 and
// 0x7f and 0x80 at the edges of the comparisons, the bytes of UTF-8
// sequences, and runs of plain bytes. Each starts at a random offset so
// that every byte falls at every place of a word, and the reading starts
// anywhere in it, up to its end. Dropping any one of the byte tests fails
// it.
func TestStringStopIsByteByByte(t *testing.T) {
	alphabet := [][]byte{
		{'"'}, {'\\'}, {0x00}, {0x1f}, {'\n'}, {0x20}, {'!'}, {'#'}, {'['}, {']'}, {0x7f}, {0x80}, {0xff},
		[]byte("é"), []byte("€"), []byte("😀"), []byte("plain ascii words"), []byte("x"),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// A tenth under -race (one goroutine: scripts/test.sh runs the million
	// without -race).
	n := racetest.Size(1_000_000, 100_000)
	if testing.Short() {
		n = 100_000
	}
	for k := 0; k < n; k++ {
		data := make([]byte, rng.IntN(8), 64)
		for range rng.IntN(12) {
			data = append(data, alphabet[rng.IntN(len(alphabet))]...)
		}
		from := rng.IntN(len(data) + 1)
		require.Equal(t, stringStopByByte(data, from), wire.StringStop(data, from), "%q from %d", data, from)
	}
	// Past the end (a reader that stepped over an escape's last byte): the
	// offset back, as the byte-by-byte reading gives it.
	require.Equal(t, 5, wire.StringStop([]byte("abc"), 5))
}
