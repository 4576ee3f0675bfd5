// Package lru is the one bounded, least-recently-used map of policycheck,
// with an optional idle TTL checked lazily and hit and miss counts: the
// engine's filter cache, context cache and decision memo, and the
// sidecar's table of engines compiled for requests' registries, its
// table of incremental runs and its prefix cache, bounded by the memory
// its entries hold (NewSized; docs/caches.md lists every cache).
package lru

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// Cache is a bounded, least-recently-used map with an optional idle TTL,
// checked lazily (on access and on insertion): it runs no goroutine. It
// is safe for concurrent use. A nil *Cache is a cache that keeps nothing:
// every Get misses and Put drops its value (the way a cache is turned
// off).
type Cache[V any] struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	now   func() time.Time
	ll    *list.List
	items map[string]*list.Element
	// size weighs a value against max (nil: each weighs 1); held is the
	// weight of the entries kept.
	size func(V) int
	held int

	evictions    int64
	hits, misses atomic.Int64
}

type lruEntry[V any] struct {
	key    string
	val    V
	weight int
	used   time.Time // last use; kept only with a TTL
}

// New returns a cache of at most max entries (at least one), each
// dropped once unused for ttl (0: never); now is the clock (nil:
// time.Now), read only with a TTL.
func New[V any](max int, ttl time.Duration, now func() time.Time) *Cache[V] {
	if max <= 0 {
		max = 1
	}
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{max: max, ttl: ttl, now: now, ll: list.New(), items: map[string]*list.Element{}}
}

// NewSized returns a cache bounded by the total weight of its values,
// size(v) each, rather than by their number: Put evicts the least
// recently used entries while the total is over max (a value heavier
// than max evicts everything, itself too). It has no TTL.
func NewSized[V any](max int, size func(V) int) *Cache[V] {
	c := New[V](max, 0, nil)
	c.size = size
	return c
}

func (c *Cache[V]) weigh(v V) int {
	if c.size == nil {
		return 1
	}
	return c.size(v)
}

func (c *Cache[V]) expired(e *lruEntry[V], now time.Time) bool {
	return c.ttl > 0 && now.Sub(e.used) > c.ttl
}

// clock is the time of a use: the zero time without a TTL, which does
// not need it.
func (c *Cache[V]) clock() time.Time {
	if c.ttl <= 0 {
		return time.Time{}
	}
	return c.now()
}

// Get returns the value under key and marks it used.
func (c *Cache[V]) Get(key string) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		c.misses.Add(1)
		return zero, false
	}
	e := el.Value.(*lruEntry[V])
	now := c.clock()
	if c.expired(e, now) {
		c.remove(el)
		c.evictions++
		c.misses.Add(1)
		return zero, false
	}
	e.used = now
	c.ll.MoveToFront(el)
	c.hits.Add(1)
	return e.val, true
}

// Put stores val under key, evicting the least recently used entries (and
// expired ones) beyond the bound.
func (c *Cache[V]) Put(key string, val V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(key, val, nil)
}

// PutEvicting is Put that returns the values it evicted, least recently
// used first, for an owner that indexes them elsewhere too.
func (c *Cache[V]) PutEvicting(key string, val V) []V {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var evicted []V
	c.put(key, val, &evicted)
	return evicted
}

func (c *Cache[V]) put(key string, val V, evicted *[]V) {
	now := c.clock()
	w := c.weigh(val)
	if el, ok := c.items[key]; ok {
		e := el.Value.(*lruEntry[V])
		c.held += w - e.weight
		e.val, e.weight, e.used = val, w, now
		c.ll.MoveToFront(el)
		for c.held > c.max && c.ll.Len() > 0 { // a heavier value
			c.evict(c.ll.Back(), evicted)
		}
		return
	}
	c.items[key] = c.ll.PushFront(&lruEntry[V]{key: key, val: val, weight: w, used: now})
	c.held += w
	for c.held > c.max && c.ll.Len() > 0 {
		c.evict(c.ll.Back(), evicted)
	}
	// Expired entries sit at the back: sweep them.
	for back := c.ll.Back(); back != nil && c.expired(back.Value.(*lruEntry[V]), now); back = c.ll.Back() {
		c.evict(back, evicted)
	}
}

func (c *Cache[V]) evict(el *list.Element, evicted *[]V) {
	if evicted != nil {
		*evicted = append(*evicted, el.Value.(*lruEntry[V]).val)
	}
	c.remove(el)
	c.evictions++
}

// Delete drops the entry under key, if any.
func (c *Cache[V]) Delete(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.remove(el)
	}
}

func (c *Cache[V]) remove(el *list.Element) {
	c.ll.Remove(el)
	e := el.Value.(*lruEntry[V])
	c.held -= e.weight
	delete(c.items, e.key)
}

// Clear drops every entry.
func (c *Cache[V]) Clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.items)
	c.held = 0
}

// Values returns the live values, most recently used first.
func (c *Cache[V]) Values() []V {
	if c == nil {
		return nil
	}
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
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.evictions
}

// Lookups returns how many Gets found their key (hits) and how many did
// not (misses, an expired entry among them) since New.
func (c *Cache[V]) Lookups() (hits, misses int64) {
	if c == nil {
		return 0, 0
	}
	return c.hits.Load(), c.misses.Load()
}

// Weight returns the total weight of the entries kept: their number, but
// for a cache made by NewSized.
func (c *Cache[V]) Weight() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}
