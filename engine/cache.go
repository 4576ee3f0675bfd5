package engine

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// filterCache is a bounded LRU of filter results, keyed by fingerprint.
// It is safe for concurrent use.
type filterCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element

	hits, misses atomic.Int64
}

type cacheEntry struct {
	key  string
	kept map[string]struct{}
	// dropped is the sorted registry tools the filter did not keep,
	// computed once when the entry is made so that a hit costs nothing
	// per registry tool.
	dropped []string
	err     string
}

func newFilterCache(max int) *filterCache {
	if max <= 0 {
		max = 4096
	}
	return &filterCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *filterCache) get(key string) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		c.hits.Add(1)
		return el.Value.(*cacheEntry), true
	}
	c.misses.Add(1)
	return nil, false
}

func (c *filterCache) put(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.key]; ok {
		el.Value = e
		c.ll.MoveToFront(el)
		return
	}
	c.items[e.key] = c.ll.PushFront(e)
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
}

func (c *filterCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
