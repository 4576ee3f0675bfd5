// Package lru is a bounded, least-recently-used map with an optional idle
// TTL, checked lazily: the sidecar's table of engines compiled for
// requests' registries and its table of incremental runs.
package lru

import (
	"container/list"
	"sync"
	"time"
)

// Cache is a bounded, least-recently-used map with an optional idle TTL,
// checked lazily (on access and on insertion): it runs no goroutine. It
// is safe for concurrent use.
type Cache[V any] struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	now   func() time.Time
	ll    *list.List
	items map[string]*list.Element

	evictions int64
}

type lruEntry[V any] struct {
	key  string
	val  V
	used time.Time
}

// New returns a cache of at most max entries (at least one), each
// dropped once unused for ttl (0: never); now is the clock (nil:
// time.Now).
func New[V any](max int, ttl time.Duration, now func() time.Time) *Cache[V] {
	if max <= 0 {
		max = 1
	}
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{max: max, ttl: ttl, now: now, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *Cache[V]) expired(e *lruEntry[V], now time.Time) bool {
	return c.ttl > 0 && now.Sub(e.used) > c.ttl
}

// Get returns the value under key and marks it used.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.items[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*lruEntry[V])
	now := c.now()
	if c.expired(e, now) {
		c.remove(el)
		c.evictions++
		return zero, false
	}
	e.used = now
	c.ll.MoveToFront(el)
	return e.val, true
}

// Put stores val under key, evicting the least recently used entries (and
// expired ones) beyond the bound.
func (c *Cache[V]) Put(key string, val V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*lruEntry[V])
		e.val, e.used = val, now
		c.ll.MoveToFront(el)
		return
	}
	c.items[key] = c.ll.PushFront(&lruEntry[V]{key: key, val: val, used: now})
	for c.ll.Len() > c.max {
		c.remove(c.ll.Back())
		c.evictions++
	}
	// Expired entries sit at the back: sweep them.
	for back := c.ll.Back(); back != nil && c.expired(back.Value.(*lruEntry[V]), now); back = c.ll.Back() {
		c.remove(back)
		c.evictions++
	}
}

// Delete drops the entry under key, if any.
func (c *Cache[V]) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.remove(el)
	}
}

func (c *Cache[V]) remove(el *list.Element) {
	c.ll.Remove(el)
	delete(c.items, el.Value.(*lruEntry[V]).key)
}

// Clear drops every entry.
func (c *Cache[V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.items)
}

// Values returns the live values, most recently used first.
func (c *Cache[V]) Values() []V {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]V, 0, c.ll.Len())
	for el := c.ll.Front(); el != nil; el = el.Next() {
		out = append(out, el.Value.(*lruEntry[V]).val)
	}
	return out
}

// Stats returns the number of entries and how many were evicted (for the
// bound or the TTL) since New.
func (c *Cache[V]) Stats() (n int, evictions int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.evictions
}
