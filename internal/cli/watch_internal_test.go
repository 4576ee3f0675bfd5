package cli

import "testing"

// TestSettle: the watched files are read again once a new stamp is seen
// twice in a row, not while it still changes, and not when the files
// changed back to what was read.
func TestSettle(t *testing.T) {
	s := settle{last: "a"}
	for i, step := range []struct {
		now    string
		reload bool
	}{
		{"a", false},
		{"b", false}, // first sight: the file may be half-written
		{"b", true},  // the same at the next look
		{"b", false}, // read already
		{"c", false},
		{"d", false}, // still changing
		{"d", true},
		{"e", false},
		{"d", false}, // changed back to what was read
		{"e", false}, // a new first sight
		{"e", true},
	} {
		if got := s.next(step.now); got != step.reload {
			t.Fatalf("step %d (%s): reload %t, want %t", i, step.now, got, step.reload)
		}
	}
}
