// Package racetest tells a test whether it runs under the race detector.
// A test of single-goroutine code (a generated corpus, a long random
// sweep) runs a sample of its cases under -race, where the detector finds
// nothing to race on and multiplies the time, and all of them without it:
// scripts/test.sh runs such tests a second time without -race (see its
// list there), so nothing the suite checks is lost.
package racetest

// Size is full, or underRace when the race detector is on.
func Size(full, underRace int) int {
	if Enabled {
		return underRace
	}
	return full
}
