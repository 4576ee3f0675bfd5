package engine

import (
	"fmt"

	"github.com/policycheck/policycheck/facts"
)

// panicked is the decision of a request whose decision panicked: failed
// closed, every call denied, the panic in Errors, assembled as any other.
// Its facts are the request's, derived again when it gave none; a
// derivation that panics too leaves them empty (no call is then listed,
// and none executes).
func (s *snapshot) panicked(req Request, dc *decideConfig, v any, stack []byte) (*Decision, *prepared, error) {
	p := &prepared{facts: req.Facts, traced: req.History}
	if p.facts == nil {
		p.facts = s.factsAfterPanic(req)
	}
	o := s.check(p, evaluated{fault: fmt.Sprintf("internal error: the engine panicked while deciding, so the decision fails closed (a bug: please report it): %v", v)})
	o.panicStack = stack
	d, err := s.assemble(p, o, dc)
	return d, p, err
}

// factsAfterPanic derives the request's facts, or none when that panics.
func (s *snapshot) factsAfterPanic(req Request) (f *facts.Facts) {
	defer func() {
		if recover() != nil {
			f = &facts.Facts{}
		}
	}()
	f, _ = s.derive(req.History, nil)
	return f
}

// Panicked reports whether the decision failed closed because the engine
// recovered from a panic on its path (a bug, said in Errors): the sidecar
// counts these in policycheck_recovered_panics_total.
func (d *Decision) Panicked() bool { return d.panicStack != nil }

// PanicStack is the stack of the panic a Panicked decision recovered
// from, for the operator's log; nil otherwise.
func (d *Decision) PanicStack() []byte { return d.panicStack }
