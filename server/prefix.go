package server

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/lru"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// prefixCache lets a stateless client that resends its whole, growing
// history on every step pay for the new messages only, as the run
// endpoint does for clients that keep an offset. It remembers, for recent
// requests, the bytes of the history array through its last message
// ("[m0,...,mk") with the facts derived from them. A later request whose
// history begins with exactly those bytes resumes from there: the bytes
// are compared, not hashed (hashing a megabyte costs more than comparing
// it), so a hit never stands for a different history; the request's
// remaining messages are scanned, decoded and checked as usual.
//
// An entry is taken by the request that extends it (trackers are not
// shared) and the extended history is stored in its place; a concurrent
// request for the same prefix finds it gone and takes the full path.
// Entries are grouped by a hash of their first message and bounded by an
// estimate of the memory they hold, least recently used first out: an
// internal/lru cache sized by that estimate (lru.NewSized) keeps them, and
// the buckets index its entries by their first message.
//
// A history is admitted on its second sight. The first time a history is
// decoded whole, the cache notes only a fingerprint of its messages; it
// keeps the history (its bytes, which the facts' arguments alias, and its
// facts) when a later request begins with the messages of a noted one. A
// conversation that grows therefore has its first two requests decoded
// whole and resumes from the third, while a history sent once, as every
// request of many users is or of traffic that reaches a fresh replica,
// costs a fingerprint instead of a megabyte kept for a request that never
// comes (a server in its own process served never-seen 1,000-message
// histories twice as fast: BENCHMARKS.md). The fingerprint only decides
// what to keep; a resume still needs the same bytes. Safe for concurrent
// use.
type prefixCache struct {
	// mu guards the buckets and the entries' keys, and orders every use
	// of entries (which has its own lock) with them.
	mu      sync.Mutex
	max     int
	entries *lru.Cache[*prefixEntry] // by key, sized by cost
	buckets map[[2]uint64][]*prefixEntry
	nextKey uint64
	hash    hasher
	// Fingerprints of histories seen once (see admit), the oldest
	// forgotten first: seenOrder is a ring of seenMax.
	seen      map[uint64]struct{}
	seenOrder []uint64
	seenNext  int
	// firstSight keeps every history at its first sight (benchmarks
	// only: see docs/caches.md).
	firstSight bool

	hits, misses, fallbacks atomic.Int64
}

// seenMax bounds the fingerprints of histories seen once: 4,096 of them,
// 32 times the entries the default bound holds at 1,000 messages. A
// history whose fingerprint was forgotten is noted again, and admitted at
// its next request.
const seenMax = 4096

// prefixEntry is one remembered history prefix.
type prefixEntry struct {
	first [2]uint64 // hash of the first message's bytes
	hist  []byte    // the history array through its last message
	owned bool      // hist is the cache's own buffer (else a request body's bytes)
	count int       // messages in the prefix
	parts int       // parts in those messages
	cost  int       // memory held, estimated, for the bound
	reg   *facts.Registry
	// Facts of the prefix: a tracker once the prefix has been extended;
	// a history decoded whole is kept as its messages, and becomes a
	// tracker only if a later request extends it.
	tracker *facts.Tracker
	history facts.History
	key     string // its key in entries; "" until put, once taken or evicted
}

func newPrefixEntry(first [2]uint64, hist []byte) *prefixEntry {
	return &prefixEntry{first: first, hist: hist}
}

func newPrefixCache(maxBytes int, firstSight bool) *prefixCache {
	if maxBytes <= 0 {
		return nil
	}
	return &prefixCache{max: maxBytes, entries: lru.NewSized(maxBytes, func(e *prefixEntry) int { return e.cost }),
		buckets: map[[2]uint64][]*prefixEntry{}, hash: newHasher(),
		seen: map[uint64]struct{}{}, firstSight: firstSight}
}

// admit tells whether a history decoded whole, of the messages msgs (each
// message's bytes), is to be kept: true when it begins with, or is, a
// history noted before, whose note it then drops. Otherwise the history
// is noted: a fingerprint that chains its messages' hashes (the hash of
// the first k messages is the fingerprint of the history of k messages).
func (c *prefixCache) admit(msgs [][]byte) bool {
	if len(msgs) == 0 {
		return false
	}
	if c.firstSight {
		return true
	}
	prints := make([]uint64, len(msgs))
	var fp uint64
	for i, m := range msgs {
		fp = c.hash.chain(fp, m)
		prints[i] = fp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(prints) - 1; i >= 0; i-- {
		if _, ok := c.seen[prints[i]]; ok {
			delete(c.seen, prints[i])
			return true
		}
	}
	last := prints[len(prints)-1]
	if len(c.seenOrder) < seenMax {
		c.seenOrder = append(c.seenOrder, last)
	} else {
		delete(c.seen, c.seenOrder[c.seenNext])
		c.seenOrder[c.seenNext] = last
		c.seenNext = (c.seenNext + 1) % seenMax
	}
	c.seen[last] = struct{}{}
	return false
}

// firstKey hashes the first element of a history array; ok is false when
// the array is empty or its first element does not scan.
func (c *prefixCache) firstKey(arr []byte) (key [2]uint64, ok bool) {
	start := wire.SkipSpace(arr, 1)
	if start >= len(arr) || arr[start] == ']' {
		return key, false
	}
	end, err := wire.SkimValue("request", arr, start, loader.DefaultMaxDepth-1)
	if err != nil {
		return key, false
	}
	return c.hash.key(arr[start:end]), true
}

// find returns the longest remembered prefix of the history array arr
// (which starts at its '['), or nil. The entry stays in the cache until
// taken. Candidates are compared from their last byte back, where two
// histories that share a beginning differ first.
func (c *prefixCache) find(arr []byte) *prefixEntry {
	first, ok := c.firstKey(arr)
	if !ok {
		return nil
	}
	c.mu.Lock()
	cands := append([]*prefixEntry(nil), c.buckets[first]...)
	c.mu.Unlock()
	slices.SortFunc(cands, func(a, b *prefixEntry) int { return len(b.hist) - len(a.hist) })
	for _, e := range cands {
		n := len(e.hist)
		if n >= len(arr) {
			continue
		}
		t := max(0, n-64)
		if bytes.Equal(arr[t:n], e.hist[t:]) && bytes.Equal(arr[:t], e.hist[:t]) {
			return e
		}
	}
	return nil
}

// hasher hashes a history's first message for the cache's buckets (128
// bits: two 64-bit maphash values with independent seeds), and chains
// messages into the fingerprints admit notes.
type hasher struct{ seeds [3]maphash.Seed }

func newHasher() hasher {
	return hasher{[3]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed()}}
}

// chain extends the fingerprint fp of a history with its next message m.
func (h hasher) chain(fp uint64, m []byte) uint64 {
	return maphash.Comparable(h.seeds[2], [2]uint64{fp, maphash.Bytes(h.seeds[2], m)})
}

func (h hasher) key(b []byte) [2]uint64 {
	return [2]uint64{maphash.Bytes(h.seeds[0], b), maphash.Bytes(h.seeds[1], b)}
}

// take removes e for the caller to extend; false when another request
// took it first or it was evicted.
func (c *prefixCache) take(e *prefixEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.key == "" {
		return false
	}
	c.entries.Delete(e.key)
	c.unbucket(e)
	return true
}

// unbucket drops e, gone from entries, from its bucket.
func (c *prefixCache) unbucket(e *prefixEntry) {
	e.key = ""
	b := c.buckets[e.first]
	for i, x := range b {
		if x == e {
			b = append(b[:i], b[i+1:]...)
			break
		}
	}
	if len(b) == 0 {
		delete(c.buckets, e.first)
	} else {
		c.buckets[e.first] = b
	}
}

// put remembers e, evicting the least recently used entries beyond the
// bound. An entry over an eighth of the bound is not kept: one very large
// history would evict most of the others, and its request's memory could
// not be returned once it is answered. The estimate: the body bytes kept
// plus, for the facts, 224 bytes per part (a decoded history holds about
// 216 per part besides the body its arguments alias: 10,000 generated
// messages, 17,753 parts, 3.8 MB; a tracker's maps hold less).
func (c *prefixCache) put(e *prefixEntry) {
	e.cost = cap(e.hist) + 224*e.parts
	if e.cost > c.max/8 || e.count == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextKey++
	e.key = strconv.FormatUint(c.nextKey, 36)
	c.buckets[e.first] = append(c.buckets[e.first], e)
	for _, old := range c.entries.PutEvicting(e.key, e) {
		c.unbucket(old)
	}
}

// holds tells whether an entry's bytes are in buf (a whole buffer, as
// allocated): a slice of buf ends where buf ends, so their last elements
// share an address. For tests (see intake.poison).
func (c *prefixCache) holds(buf []byte) bool {
	if len(buf) == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries.Values() {
		if h := e.hist[:cap(e.hist)]; len(h) > 0 && &h[len(h)-1] == &buf[len(buf)-1] {
			return true
		}
	}
	return false
}

// stats returns the entries held, their estimated memory, and the
// histories noted as seen once.
func (c *prefixCache) stats() (entries, bytes, noted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, _ := c.entries.Stats()
	return n, c.entries.Weight(), len(c.seen)
}
