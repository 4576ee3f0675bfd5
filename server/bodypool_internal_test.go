package server

import (
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
