package engine

import (
	"fmt"

	"github.com/policycheck/policycheck/facts"
)

// panicked is the decision of a request whose decision panicked: failed
// closed, every call denied, the panic in Errors. Its facts are the
// request's, derived again when it gave none; a derivation that panics
// too leaves them empty (no call is then listed, and none executes).
func (s *snapshot) panicked(req Request, v any, stack []byte) *Decision {
	f := req.Facts
	if f == nil {
		f = s.factsAfterPanic(req)
	}
	d := newDecision(f)
	d.PolicyRevision, d.RegistryRevision = s.rev, s.regRev
	d.panicStack = stack
	d.failClosed(s, fmt.Sprintf("internal error: the engine panicked while deciding, so the decision fails closed (a bug: please report it): %v", v))
	return d
}

// factsAfterPanic derives the request's facts, or none when that panics.
func (s *snapshot) factsAfterPanic(req Request) (f *facts.Facts) {
	defer func() {
		if recover() != nil {
			f = &facts.Facts{}
		}
	}()
	derived := facts.DeriveWith(req.History, s.reg, s.opts)
	return &derived
}

// Panicked reports whether the decision failed closed because the engine
// recovered from a panic on its path (a bug, said in Errors): the sidecar
// counts these in policycheck_recovered_panics_total.
func (d *Decision) Panicked() bool { return d.panicStack != nil }

// PanicStack is the stack of the panic a Panicked decision recovered
// from, for the operator's log; nil otherwise.
func (d *Decision) PanicStack() []byte { return d.panicStack }
