// Package floorhttp is the floor's HTTP handler: it does the least a
// sidecar must do with a request, and nothing else. It reads each
// request's body whole into a reused buffer and answers 200 with a JSON
// object of the size the query's reply parameter asks for (default 16
// bytes). The floor command (internal/testkit/servetest/floor) serves it
// in its own process for the side-by-side harness; benchmarks serve it
// in process, beside the sidecar's handler, on the same bodies. Its zero
// value is ready to use.
package floorhttp

import (
	"errors"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"sync"
)

// maxReply bounds the answer a request may ask for.
const maxReply = 64 << 20

// Handler serves every request the same way; its buffers are shared by
// all requests, so after a warm-up a body of a size seen before is read
// without allocating.
type Handler struct {
	mu      sync.Mutex
	free    [][]byte
	replies map[int][]byte // by size
}

func (f *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for name := range q {
		if name != "reply" {
			// A misspelt reply would otherwise answer 16 bytes, and the
			// floor would time a smaller answer than the sidecar's.
			http.Error(w, "query parameter "+strconv.Quote(name)+" is not read; the floor reads only reply", http.StatusBadRequest)
			return
		}
	}
	reply := 16
	if s := q.Get("reply"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 16 || n > maxReply {
			http.Error(w, "reply must be a number of bytes from 16 to "+strconv.Itoa(maxReply), http.StatusBadRequest)
			return
		}
		reply = n
	}
	buf := f.get(int(r.ContentLength))
	defer f.put(buf)
	// The floor measures moving the bytes, not checking them: a body that
	// ends before its declared length (ErrUnexpectedEOF) is taken as it
	// is, and a longer one is read to its end below.
	n, err := io.ReadFull(r.Body, buf[:cap(buf)])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if n == cap(buf) { // a body longer than it said, or of unknown length
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	out := f.reply(reply)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// reply returns the answer of n bytes, {"floor":"xx...x"}, made once.
func (f *Handler) reply(n int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if out, ok := f.replies[n]; ok {
		return out
	}
	out := make([]byte, 0, n)
	out = append(out, `{"floor":"`...)
	for len(out) < n-2 {
		out = append(out, 'x')
	}
	out = append(out, `"}`...)
	if f.replies == nil {
		f.replies = map[int][]byte{}
	}
	f.replies[n] = out
	return out
}

// get returns a free buffer with room for n bytes, or a new one. A new
// one is made the next power of two long, so that a body a little longer
// than the last (a growing history's) finds one free.
func (f *Handler) get(n int) []byte {
	n = 1 << bits.Len(uint(max(n, 4096)-1))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, b := range f.free {
		if cap(b) >= n {
			f.free[i] = f.free[len(f.free)-1]
			f.free = f.free[:len(f.free)-1]
			return b
		}
	}
	return make([]byte, n)
}

func (f *Handler) put(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.free = append(f.free, b)
}
