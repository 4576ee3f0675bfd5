package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBodyPoolIsSharedBoundedAndTrimmed: a buffer given back on one
// goroutine is the next one taken on any other (newest first), the pool
// keeps no more than its bytes, and it lets go of what no request took
// for its idle time.
func TestBodyPoolIsSharedBoundedAndTrimmed(t *testing.T) {
	p := &bodyPool{max: 3 * minPooled, idle: time.Hour}
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = make([]byte, 10, minPooled)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range bufs {
			p.put(0, b)
		}
	}()
	<-done
	require.Equal(t, 3*minPooled, p.held(), "the fourth buffer is over the pool's bytes")
	got := make(chan []byte)
	go func() { got <- p.get(0) }()
	b := <-got
	require.Len(t, b, 0)
	require.Same(t, &bufs[2][:1][0], &b[:1][0], "the newest buffer first, on another goroutine")
	require.Nil(t, p.get(1), "no buffer of another class")
	require.Equal(t, 2*minPooled, p.held())

	idle := &bodyPool{max: poolBytes, idle: 20 * time.Millisecond}
	idle.put(0, make([]byte, 0, minPooled))
	idle.put(2, make([]byte, 0, 4*minPooled))
	require.Equal(t, 5*minPooled, idle.held())
	require.Eventually(t, func() bool { return idle.held() == 0 }, 5*time.Second, 5*time.Millisecond,
		"buffers unused for the idle time are let go")
	require.Nil(t, idle.get(2))
}

// TestBodyPoolMakesRoomForALargerBuffer: a buffer that would take the
// full pool over its bytes takes the place of smaller ones (smallest and
// oldest first), since a large one costs the most to fault in again; one
// that smaller buffers cannot make room for is let go, and they stay.
func TestBodyPoolMakesRoomForALargerBuffer(t *testing.T) {
	p := &bodyPool{max: 8 * minPooled, idle: time.Hour}
	small := func(k int) []byte { return make([]byte, 0, minPooled<<k) }
	first, second := small(0), small(0)
	p.put(0, first)
	p.put(0, second)
	mid := small(1)
	p.put(1, mid)
	p.put(1, small(1))
	require.Equal(t, 6*minPooled, p.held())

	large := small(2) // 4 units: two must go
	p.put(2, large)
	require.Equal(t, 8*minPooled, p.held())
	require.NotNil(t, p.get(2), "the large buffer is kept")
	require.Nil(t, p.get(0), "both of the smallest class went first")
	require.NotNil(t, p.get(1))
	require.NotNil(t, p.get(1), "the next class was not touched")

	// A full pool of large buffers has no smaller ones to let go of.
	p.put(2, small(2))
	p.put(2, small(2))
	p.put(0, first)
	require.Equal(t, 8*minPooled, p.held(), "the small buffer is let go: nothing smaller makes room")
	require.Nil(t, p.get(0))
	// Two of class 2 make room for one of class 3; nothing makes room
	// for one over the pool's bytes.
	p.put(3, small(3))
	require.Equal(t, 8*minPooled, p.held())
	p.put(4, small(4))
	require.Equal(t, 8*minPooled, p.held())
	require.Nil(t, p.get(4), "a buffer over the pool's bytes is let go")
	require.Nil(t, p.get(2))
	require.NotNil(t, p.get(3))
	require.Zero(t, p.held())
}

// TestReadTakesAPooledBufferForTheWholeBody: a body whose declared
// length's buffer the pool holds is read into that buffer, with no
// smaller ones taken and given back on the way; with the pool empty it
// starts at upFront, as any body.
func TestReadTakesAPooledBufferForTheWholeBody(t *testing.T) {
	in := &intake{maxBody: 64 << 20, recycle: true, bodies: &bodyPool{max: poolBytes, idle: time.Hour}}
	read := func(fill byte) []byte {
		body := bytes.Repeat([]byte{fill}, 3<<20)
		req := httptest.NewRequest(http.MethodPost, "/v1/decide", bytes.NewReader(body))
		got, pooled, herr := in.read(httptest.NewRecorder(), req, true)
		require.Nil(t, herr)
		require.True(t, pooled)
		require.Equal(t, body, got)
		return got
	}
	got := read('x')
	require.Equal(t, 4<<20, cap(got), "grown from 2 MiB to its class")
	require.Equal(t, upFront, in.bodies.held(), "the 2 MiB buffer went back")
	in.reuse(got)

	again := read('y')
	require.Same(t, &got[0], &again[0], "the pooled buffer for the whole body")
	small := in.bodies.get(bodyClass(upFront))
	require.NotNil(t, small)
	require.Equal(t, byte('x'), small[:1][0], "the 2 MiB buffer was not read into")
}

// TestReadMovesToTheWholeBodyOnceAQuarterIsHere: a 10 MB body with no
// buffer in the pool for all of it starts in 2 MiB, moves to 4 MiB, and
// from there, a quarter of it read, to its whole class: no 8 MiB buffer
// and no copy into one. Both smaller buffers go back to the pool.
func TestReadMovesToTheWholeBodyOnceAQuarterIsHere(t *testing.T) {
	in := &intake{maxBody: 64 << 20, recycle: true, bodies: &bodyPool{max: poolBytes, idle: time.Hour}}
	body := bytes.Repeat([]byte{'x'}, 10<<20)
	req := httptest.NewRequest(http.MethodPost, "/v1/decide", bytes.NewReader(body))
	got, pooled, herr := in.read(httptest.NewRecorder(), req, true)
	require.Nil(t, herr)
	require.True(t, pooled)
	require.Equal(t, body, got)
	require.Equal(t, 16<<20, cap(got), "the class of the whole body")
	require.Equal(t, upFront+4<<20, in.bodies.held(), "the 2 and 4 MiB buffers went back, and there was no 8 MiB one")
	require.Nil(t, in.bodies.get(bodyClass(8<<20)))
}

// failingBody sends n bytes of a body, then fails as a dropped
// connection does.
type failingBody struct{ n int }

func (f *failingBody) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), f.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	f.n -= k
	return k, nil
}

// TestAFailedReadGivesItsBuffersBack: a pooled body whose read fails,
// after it had grown through two buffers, leaves both in the pool: the
// request is refused (400) and nothing it took is lost.
func TestAFailedReadGivesItsBuffersBack(t *testing.T) {
	in := &intake{maxBody: 64 << 20, recycle: true, bodies: &bodyPool{max: poolBytes, idle: time.Hour}}
	req := httptest.NewRequest(http.MethodPost, "/v1/decide", &failingBody{n: 3 << 20})
	req.ContentLength = 4 << 20
	body, pooled, herr := in.read(httptest.NewRecorder(), req, true)
	require.Nil(t, body)
	require.False(t, pooled)
	require.NotNil(t, herr)
	require.Equal(t, http.StatusBadRequest, herr.Status)
	require.Contains(t, herr.Message, "reading the body")
	require.Equal(t, upFront+4<<20, in.bodies.held(), "the 2 MiB buffer and the 4 MiB one it grew into")
}
