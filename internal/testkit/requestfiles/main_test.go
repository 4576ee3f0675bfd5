package main

import (
	"slices"
	"testing"
)

// TestMeasureMakesBothRequests runs the two measured requests without
// coverage counters: each is answered 200 (post panics otherwise), and
// each is measured once, after its own clear.
func TestMeasureMakesBothRequests(t *testing.T) {
	var events []string
	measure(func() { events = append(events, "clear") }, func(k string) { events = append(events, k) })
	if want := []string{"clear", "step", "clear", "decide"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
}
