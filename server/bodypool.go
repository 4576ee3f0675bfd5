package server

import (
	"slices"
	"sync"
	"time"
)

// bodyPool keeps the buffers of answered request bodies for the next
// requests to read into: a free list per size class (see bodyClass),
// shared by every core. A sync.Pool keeps a buffer put back where only
// the core that put it finds it first, and a request is seldom read on
// the core that answered the last one: never-seen 10,000-message
// requests from one client, whose bodies grow through 2 to 16 MiB
// buffers, missed 17 times in 60 requests, and each miss faulted its
// megabytes in afresh (BENCHMARKS.md). The pool holds at most max
// bytes, and a buffer no request took for idle is let go, so that a
// burst of large requests does not hold its memory forever. A buffer
// given back to a full pool takes the place of smaller ones: four
// clients of 11 MB bodies need all of max in 16 MiB buffers, and the
// 2 MiB ones their reads start in had been crowding them out. Safe for
// concurrent use.
type bodyPool struct {
	max  int
	idle time.Duration

	mu       sync.Mutex
	free     [bodyClasses][]freeBuf // each oldest first
	bytes    int
	trimming bool // a trim is scheduled
}

type freeBuf struct {
	b  []byte
	at time.Time // when it was put back
}

// Defaults of bodyPool: four of the largest buffers, and a minute.
const (
	poolBytes = 4 * maxPooled
	poolIdle  = time.Minute
)

// get returns an empty buffer of class k, or nil when the pool has none.
func (p *bodyPool) get(k int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free[k])
	if n == 0 {
		return nil
	}
	b := p.free[k][n-1].b
	p.free[k][n-1] = freeBuf{}
	p.free[k] = p.free[k][:n-1]
	p.bytes -= cap(b)
	return b[:0]
}

// put keeps b, a buffer of class k. When that would take the pool over
// its bytes, it lets go of buffers of smaller classes to make room,
// smallest and oldest first: a large buffer costs the most to fault in
// again. When they cannot make room, b is let go instead.
func (p *bodyPool) put(k int, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bytes+cap(b) > p.max {
		smaller := 0
		for j := range k {
			for _, f := range p.free[j] {
				smaller += cap(f.b)
			}
		}
		if p.bytes-smaller+cap(b) > p.max {
			return
		}
		for j := 0; p.bytes+cap(b) > p.max; {
			if len(p.free[j]) == 0 {
				j++
				continue
			}
			p.bytes -= cap(p.free[j][0].b)
			p.free[j] = slices.Delete(p.free[j], 0, 1)
		}
	}
	p.free[k] = append(p.free[k], freeBuf{b: b, at: time.Now()})
	p.bytes += cap(b)
	if !p.trimming {
		p.trimming = true
		time.AfterFunc(p.idle, p.trim)
	}
}

// trim lets go of the buffers put back more than idle ago, and runs
// again later while the pool holds any.
func (p *bodyPool) trim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	cutoff := time.Now().Add(-p.idle)
	for k, list := range p.free {
		old := 0
		for old < len(list) && !list[old].at.After(cutoff) {
			p.bytes -= cap(list[old].b)
			old++
		}
		if old > 0 {
			p.free[k] = append([]freeBuf(nil), list[old:]...)
		}
	}
	if p.trimming = p.bytes > 0; p.trimming {
		time.AfterFunc(p.idle, p.trim)
	}
}

// held is how many bytes the pool holds.
func (p *bodyPool) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}
