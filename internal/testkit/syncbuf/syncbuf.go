// Package syncbuf holds Buffer, the bytes a test reads while other
// goroutines write them (a server's or a gateway's log, a stream a client
// reads, a progress line): one lock around a bytes.Buffer, so that the race
// detector sees only the locking of the code under test.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use whose bytes may be read
// while it is written. The zero value is an empty buffer ready to use; a
// Buffer must not be copied after first use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
