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

// TestFilterCacheKeepsOneEntryPerActiveSet: the filter cache keeps the
// results of one active set's filters as one entry; its hits and misses
// still count filter results (docs/caches.md, engine.filters).
func TestFilterCacheKeepsOneEntryPerActiveSet(t *testing.T) {
	reg := mustRegistry(t, `{
	"capabilities": [{"id": "a"}, {"id": "b"}],
	"tools": [{"name": "get_time"}, {"name": "ta", "capability": "a"}, {"name": "tb", "capability": "b"}]
}`)
	filter := func(id, drop string) engine.Source {
		return engine.Source{File: "filters/" + id + ".rego", Text: "package policycheck.capabilities." + id + `

prepare_tools contains t.name if {
	some t in input.tools
	t.name != "` + drop + `"
}
`}
	}
	e := mustEngine(t, reg, engine.Modules(filter("a", "tb"), filter("b", "ta")))
	h := mustHistory(t, wReq(wUser("what time is it")))
	for range 2 {
		mustDecide(t, e, h, map[string]any{"user": "ada"})
	}
	hits, misses, entries := e.CacheStats()
	require.Equal(t, int64(2), hits, "the second decision: both filters' results from the cache")
	require.Equal(t, int64(2), misses, "the first decision: both filters evaluated")
	require.Equal(t, 1, entries, "one active set")
}
