package gateway

import (
	"testing"
)

// TestAnswerFrameIsTheHistorys: a step decodes the pending answer from
// the frame answer made, whose inner message is the one the history
// holds (one copy, which the run's messages alias); a pending message
// the history got otherwise (replayed from the store) is framed anew.
func TestAnswerFrameIsTheHistorys(t *testing.T) {
	s := &session{}
	if f := s.pendingFrame(); f != nil {
		t.Fatalf("nothing pending: %q", f)
	}
	msg := []byte(`{"parts":[],"kind":"request"}`)
	s.answer(msg)
	f := s.pendingFrame()
	if string(f) != "["+string(msg)+"]" {
		t.Fatalf("frame %q", f)
	}
	if &f[1] != &s.msgs[0][0] {
		t.Fatal("the frame is a copy of the history's message, not its bytes")
	}
	if in := s.msgs[0]; cap(in) != len(in) {
		t.Fatalf("the history's message has room to grow into its frame (cap %d, len %d)", cap(in), len(in))
	}

	s.pending = false
	replayed := []byte(`{"parts":[],"kind":"request","x":1}`)
	s.msgs = append(s.msgs, replayed)
	s.pending = true
	f = s.pendingFrame()
	if string(f) != "["+string(replayed)+"]" {
		t.Fatalf("frame of a replayed message %q", f)
	}
	if string(inner(f)) != string(replayed) {
		t.Fatalf("inner %q", inner(f))
	}
}
