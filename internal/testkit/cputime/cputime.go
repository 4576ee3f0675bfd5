// Package cputime reports, in benchmarks, the CPU time of the process per
// iteration as the extra metric cpu-ns/op. On a shared machine ns/op (wall
// clock) includes the time the benchmark waited for a core; cpu-ns/op does
// not (it does include the garbage collector's work on other threads, which
// is part of the cost). Where the platform cannot read the process's CPU
// time, nothing is reported.
package cputime

import (
	"testing"
	"time"
)

// Meter counts the iterations of a timed loop and the process CPU time
// they used. Start it right before the loop, Tick once an iteration and
// Report after it.
type Meter struct {
	start time.Duration
	ok    bool
	n     int
}

// Start starts a Meter.
func Start() *Meter {
	d, ok := Process()
	return &Meter{start: d, ok: ok}
}

// Tick counts one iteration.
func (m *Meter) Tick() { m.n++ }

// Report reports the CPU time per counted iteration as cpu-ns/op.
func (m *Meter) Report(b *testing.B) {
	end, ok := Process()
	if m.ok && ok && m.n > 0 {
		b.ReportMetric(float64(end-m.start)/float64(m.n), "cpu-ns/op")
	}
}

// PerOp starts counting the process's CPU time and returns the function
// that reports it per iteration (b.N, so call it after the timed loop) as
// cpu-ns/op.
func PerOp(b *testing.B) func() {
	start, ok := Process()
	return func() {
		if end, endOK := Process(); ok && endOK && end > start && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
