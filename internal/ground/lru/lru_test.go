package lru_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/ground/lru"
)

// TestBoundEvictsLeastRecentlyUsed: past its bound the cache drops the
// entry used longest ago; a Get counts as a use.
func TestBoundEvictsLeastRecentlyUsed(t *testing.T) {
	c := lru.New[int](2, 0, nil)
	c.Put("a", 1)
	c.Put("b", 2)
	_, ok := c.Get("a") // b is now the least recently used
	require.True(t, ok)
	c.Put("c", 3)
	_, ok = c.Get("b")
	require.False(t, ok)
	require.Equal(t, []int{3, 1}, c.Values())
	n, evicted := c.Stats()
	require.Equal(t, 2, n)
	require.Equal(t, int64(1), evicted)
	c.Put("a", 10) // replaces, evicts nothing
	v, _ := c.Get("a")
	require.Equal(t, 10, v)
	_, evicted = c.Stats()
	require.Equal(t, int64(1), evicted)
}

// TestIdleEntriesExpire: an entry unused for longer than the TTL is gone
// on its next Get, and swept by a Put; a use keeps it.
func TestIdleEntriesExpire(t *testing.T) {
	now := time.Unix(0, 0)
	c := lru.New[string](10, time.Minute, func() time.Time { return now })
	c.Put("old", "x")
	c.Put("kept", "y")
	now = now.Add(50 * time.Second)
	_, ok := c.Get("kept")
	require.True(t, ok)
	now = now.Add(20 * time.Second) // old idle 70 s, kept 20 s
	_, ok = c.Get("old")
	require.False(t, ok)
	_, ok = c.Get("kept")
	require.True(t, ok)

	c.Put("stale", "z")
	now = now.Add(2 * time.Minute)
	c.Put("fresh", "w") // sweeps what expired behind it
	n, evicted := c.Stats()
	require.Equal(t, 1, n)
	require.Equal(t, int64(3), evicted)
}

// TestDeleteAndClear, and a bound below one is one.
func TestDeleteAndClear(t *testing.T) {
	c := lru.New[int](0, 0, nil)
	c.Put("a", 1)
	c.Put("b", 2)
	require.Equal(t, []int{2}, c.Values())
	c.Delete("b")
	c.Delete("missing")
	require.Empty(t, c.Values())
	c.Put("c", 3)
	c.Clear()
	_, ok := c.Get("c")
	require.False(t, ok)
}

// TestConcurrentUse: go test -race checks the lock.
func TestConcurrentUse(t *testing.T) {
	c := lru.New[int](8, time.Hour, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				k := strconv.Itoa((g*7 + i) % 20)
				c.Put(k, i)
				c.Get(k)
				if i%100 == 0 {
					c.Values()
					c.Stats()
					c.Delete(k)
				}
			}
		})
	}
	wg.Wait()
	n, _ := c.Stats()
	require.LessOrEqual(t, n, 8)
}

// TestLookupsCountHitsAndMisses: every Get is a hit or a miss, an
// expired entry a miss.
func TestLookupsCountHitsAndMisses(t *testing.T) {
	now := time.Unix(0, 0)
	c := lru.New[int](2, time.Minute, func() time.Time { return now })
	c.Put("a", 1)
	c.Get("a")
	c.Get("b")
	now = now.Add(2 * time.Minute)
	c.Get("a")
	hits, misses := c.Lookups()
	require.Equal(t, int64(1), hits)
	require.Equal(t, int64(2), misses)
}

// TestNilCacheKeepsNothing: a nil cache is a cache turned off.
func TestNilCacheKeepsNothing(t *testing.T) {
	var c *lru.Cache[int]
	c.Put("a", 1)
	_, ok := c.Get("a")
	require.False(t, ok)
	c.Delete("a")
	c.Clear()
	require.Empty(t, c.Values())
	n, ev := c.Stats()
	require.Zero(t, n)
	require.Zero(t, ev)
	h, m := c.Lookups()
	require.Zero(t, h+m)
}

// TestSizedEvictsByWeight: a sized cache keeps what its bound weighs,
// least recently used out, and says what it evicted.
func TestSizedEvictsByWeight(t *testing.T) {
	c := lru.NewSized[int](10, func(v int) int { return v })
	require.Empty(t, c.PutEvicting("a", 4))
	require.Empty(t, c.PutEvicting("b", 5))
	require.Equal(t, 9, c.Weight())
	require.Equal(t, []int{4}, c.PutEvicting("c", 3)) // 12 > 10: a goes
	require.Equal(t, 8, c.Weight())
	require.Equal(t, []int{5}, c.PutEvicting("c", 9)) // c grows: b goes
	require.Equal(t, 9, c.Weight())
	require.Equal(t, []int{9, 11}, c.PutEvicting("f", 11)) // heavier than the bound: everything goes
	require.Zero(t, c.Weight())
	c.Put("d", 2)
	c.Delete("d")
	require.Zero(t, c.Weight())
	c.Put("e", 1)
	c.Clear()
	require.Zero(t, c.Weight())
	n, ev := c.Stats()
	require.Zero(t, n)
	require.Equal(t, int64(4), ev)
}
