package gateway

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Decisions run on a few long-lived goroutines rather than on the SDK's
// goroutine of each request: a Rego evaluation recurses deeply, and on a
// fresh goroutine its stack is grown and copied again on every call
// (about a fifth of a call's CPU when measured). A decider's stack stays
// grown between garbage collections; a collection halves the stack of a
// goroutine that waits using less than a quarter of it, so a decider
// grows it once more after each (about 0.02 ms per call at 10,000 calls,
// BENCHMARKS.md).

// deciderJob is one decision to run.
type deciderJob struct {
	f    func() error
	done chan error
}

// startDeciders starts the deciders; they stop when ctx ends.
func (g *Gateway) startDeciders(ctx context.Context) {
	g.jobs = make(chan deciderJob)
	for range max(2, runtime.GOMAXPROCS(0)) {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-g.jobs:
					j.done <- runJob(j.f)
				}
			}
		}()
	}
}

// runJob runs f, turning a panic into an error: a decider must survive
// whatever one decision does.
func runJob(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the decision panicked: %v\n%s", v, debug.Stack())
		}
	}()
	return f()
}

// decide runs f on a decider and waits for it.
func (g *Gateway) decide(ctx context.Context, f func() error) error {
	if g.jobs == nil {
		return runJob(f)
	}
	done := make(chan error, 1)
	select {
	case g.jobs <- deciderJob{f, done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-done
}
