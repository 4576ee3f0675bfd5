package racetest_test

import (
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/racetest"
)

func TestSizeFollowsTheRaceDetector(t *testing.T) {
	want := 100
	if racetest.Enabled {
		want = 10
	}
	if got := racetest.Size(100, 10); got != want {
		t.Fatalf("Size(100, 10) = %d with Enabled=%v, want %d", got, racetest.Enabled, want)
	}
}
