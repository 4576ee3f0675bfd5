//go:build race

package racetest

// Enabled is true when the race detector is on (go test -race).
const Enabled = true
