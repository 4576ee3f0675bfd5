package engine

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// lruCache is a bounded LRU keyed by string, safe for concurrent use. The
// engine keeps filter results by fingerprint, the composition of the
// filter results of one active set, recent request contexts converted,
// and the decision memo.
type lruCache[V any] struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element

	hits, misses atomic.Int64
}

type lruItem[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lruCache[V] {
	if max <= 0 {
		max = 4096
	}
	return &lruCache[V]{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *lruCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		c.hits.Add(1)
		return el.Value.(*lruItem[V]).val, true
	}
	c.misses.Add(1)
	var zero V
	return zero, false
}

func (c *lruCache[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*lruItem[V]).val = v
		c.ll.MoveToFront(el)
		return
	}
	c.items[key] = c.ll.PushFront(&lruItem[V]{key: key, val: v})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*lruItem[V]).key)
	}
}

func (c *lruCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// cacheEntry is one filter's result under one fingerprint.
type cacheEntry struct {
	key string
	// dropped is the sorted registry tools the filter did not keep,
	// computed once when the entry is made so that a hit costs nothing
	// per registry tool.
	dropped []string
	err     string
}
