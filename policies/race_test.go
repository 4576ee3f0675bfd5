//go:build race

package policies_test

// raceDetector is true under -race, where the in-process mutation run
// would take several times longer for no race to find (it shares no state
// between goroutines): scripts/test.sh runs it separately without -race.
const raceDetector = true
