package loader

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// TestFindGivesUpAfterMaxTries: a goroutine that guesses inside a string
// made of "},{" gives up after maxTries places, where each failed try
// would otherwise count the lines before it: a thousand tries on a
// megabyte would read a gigabyte.
func TestFindGivesUpAfterMaxTries(t *testing.T) {
	junk := strings.Repeat("},{!", 10_000)
	data := []byte(`[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"` + junk + `"}]}]`)
	p := &piece{guess: 40}
	p.d = historyDecoder{Scanner: wire.Scanner{Data: data, MaxDepth: DefaultMaxDepth}}
	var abandon atomic.Bool
	require.False(t, p.find(2, &abandon))
	// Each try leaves the scanner just past the '{' it tried.
	last := strings.Index(string(data), junk) + 4*maxTries + 3
	require.LessOrEqual(t, p.d.I, last, "tried past the %dth place", maxTries)
}
