package server

import (
	"hash/maphash"
	"sync"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// messageCache remembers decoded messages by a 128-bit hash of their
// bytes, so that an agent that resends its whole, growing history on
// every step has only the new messages decoded: the history decoder's
// rules apply to each message on its own (only the message and part
// counts span messages, and decodeHistory checks those on the whole).
// Two generations bound it to about max bytes of message JSON. Cached
// messages are shared between requests and never modified. Safe for
// concurrent use.
type messageCache struct {
	mu        sync.Mutex
	max       int
	bytes     int
	cur, prev map[[2]uint64]facts.Message
}

// hasher hashes message bytes for the caches (128 bits: two 64-bit
// maphash values with independent seeds).
type hasher struct{ seeds [2]maphash.Seed }

func newHasher() hasher { return hasher{[2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}} }

func (h hasher) keys(elems [][]byte) [][2]uint64 {
	keys := make([][2]uint64, len(elems))
	for i, e := range elems {
		keys[i] = [2]uint64{maphash.Bytes(h.seeds[0], e), maphash.Bytes(h.seeds[1], e)}
	}
	return keys
}

func newMessageCache(maxBytes int) *messageCache {
	return &messageCache{max: maxBytes, cur: map[[2]uint64]facts.Message{}, prev: map[[2]uint64]facts.Message{}}
}

// decodeHistory decodes the history whose message bytes are elems (as
// scanEnvelope found them in raw; keys are their hashes). Messages seen before come from the
// cache; the others are decoded together. Any error is the one
// loader.DecodeHistory gives on raw, pointers included.
func (c *messageCache) decodeHistory(raw []byte, elems [][]byte, keys [][2]uint64, lim loader.Limits) (facts.History, error) {
	if c == nil || elems == nil || (lim.MaxMessages > 0 && len(elems) > lim.MaxMessages) ||
		(lim.MaxBytes > 0 && int64(len(raw)) > lim.MaxBytes) {
		return loader.DecodeHistory("request", raw, lim)
	}
	h := make(facts.History, len(elems))
	var todo []int
	c.mu.Lock()
	for i := range elems {
		if m, ok := c.cur[keys[i]]; ok {
			h[i] = m
			continue
		}
		if m, ok := c.prev[keys[i]]; ok {
			h[i] = m
			c.cur[keys[i]] = m
			continue
		}
		todo = append(todo, i)
	}
	c.mu.Unlock()
	if len(todo) > 0 {
		batch := joinArray(elems, todo)
		blim := lim
		blim.MaxBytes, blim.MaxMessages, blim.MaxParts = 0, 0, 0
		msgs, err := loader.DecodeMessages("request", batch, 0, blim)
		if err != nil || len(msgs) != len(todo) {
			// The exact error, pointers and all, from the whole history.
			return loader.DecodeHistory("request", raw, lim)
		}
		c.mu.Lock()
		for j, i := range todo {
			h[i] = msgs[j]
			if c.bytes >= c.max/2 {
				c.prev, c.cur, c.bytes = c.cur, make(map[[2]uint64]facts.Message, len(c.cur)), 0
			}
			c.cur[keys[i]] = msgs[j]
			c.bytes += len(elems[i])
		}
		c.mu.Unlock()
	}
	if lim.MaxParts > 0 {
		parts := 0
		for i := range h {
			parts += len(h[i].Parts)
		}
		if parts > lim.MaxParts {
			return loader.DecodeHistory("request", raw, lim)
		}
	}
	return h, nil
}
