package engine

import "context"

// WithBeforeEval runs f with the decision's context after the deadline
// check and before evaluation, so a test can cancel a decision while its
// policy evaluates without racing a timer against the machine's load.
func WithBeforeEval(f func(context.Context)) DecideOption {
	return func(c *decideConfig) { c.beforeEval = f }
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
