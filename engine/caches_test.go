package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// TestContextCacheStatsCountRepeats: a context decided again is found
// converted (a hit), a new one is converted and kept (a miss), one over
// 4,096 bytes of JSON is counted in neither.
func TestContextCacheStatsCountRepeats(t *testing.T) {
	e := mustEngine(t, mustRegistry(t, opsRegistry))
	ctx := context.Background()
	h := mustHistory(t, wReq(wUser("what time is it")))
	for _, c := range []any{
		map[string]any{"user": "ada"},
		map[string]any{"user": "ada"},
		map[string]any{"user": "bob"},
		map[string]any{"blob": string(make([]byte, 5000))},
	} {
		_, err := e.Decide(ctx, engine.Request{History: h, Context: c})
		require.NoError(t, err)
	}
	hits, misses, entries := e.ContextCacheStats()
	require.Equal(t, int64(1), hits)
	require.Equal(t, int64(2), misses)
	require.Equal(t, 2, entries)
}
