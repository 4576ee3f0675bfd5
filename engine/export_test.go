package engine

import "context"

// WithBeforeEval runs f with the decision's context after the deadline
// check and before evaluation, so a test can cancel a decision while its
// policy evaluates without racing a timer against the machine's load.
func WithBeforeEval(f func(context.Context)) DecideOption {
	return func(c *decideConfig) { c.beforeEval = f }
}

// WithoutCache turns off one of the engine's caches, named as in
// docs/caches.md ("engine.filters", "engine.contexts", "engine.memo"), so that a benchmark can measure what it saves on the
// same workload. It is no user option: every cache is on in production.
func WithoutCache(name string) Option {
	return func(c *config) {
		switch name {
		case cacheFilters, cacheContexts, cacheMemo:
		default:
			panic("engine: no cache named " + name)
		}
		m := make(map[string]bool, len(c.cachesOff)+1)
		for k, v := range c.cachesOff {
			m[k] = v
		}
		m[name] = true
		c.cachesOff = m
	}
}

// InvariantNames returns the names of the invariants the engine holds
// over the policy's answer, in order.
func InvariantNames() []string {
	out := make([]string, len(invariants))
	for i, inv := range invariants {
		out[i] = inv.name
	}
	return out
}

// WithPerCallEvaluation evaluates the decision part by part, as when its
// combined evaluation raises an error (percall.go), so that a test can
// hold the two evaluations to one answer.
func WithPerCallEvaluation() DecideOption {
	return func(c *decideConfig) { c.perCall = true }
}

// HasPerCall reports whether the engine can confine a policy error to
// the call whose rules raised it.
func (e *Engine) HasPerCall() bool { return e.snap.Load().perCall != nil }
