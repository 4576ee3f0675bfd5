package server

import (
	"strconv"
	"testing"
)

// TestAdmitForgetsTheOldestNotes: the fingerprints of histories seen once
// are bounded by seenMax, the oldest forgotten first; a forgotten history
// is noted again rather than admitted.
func TestAdmitForgetsTheOldestNotes(t *testing.T) {
	c := newPrefixCache(1<<20, false)
	hist := func(i int) [][]byte { return [][]byte{[]byte(`{"n":` + strconv.Itoa(i) + `}`), []byte(`{}`)} }
	for i := range seenMax + 10 {
		if c.admit(hist(i)) {
			t.Fatalf("history %d admitted at its first sight", i)
		}
	}
	if len(c.seen) != seenMax || len(c.seenOrder) != seenMax {
		t.Fatalf("notes: %d in the set, %d in the ring; want %d", len(c.seen), len(c.seenOrder), seenMax)
	}
	if c.admit(hist(3)) {
		t.Fatal("a forgotten history was admitted")
	}
	if !c.admit(hist(seenMax + 5)) {
		t.Fatal("a noted history was not admitted at its second sight")
	}
	if !c.admit(append(hist(seenMax+9), []byte(`{"more":1}`))) {
		t.Fatal("a history that extends a noted one was not admitted")
	}
	if len(c.seen) > seenMax {
		t.Fatalf("%d notes, over %d", len(c.seen), seenMax)
	}
}
