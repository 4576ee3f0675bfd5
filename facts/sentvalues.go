package facts

import (
	"slices"
	"sort"

	"github.com/policycheck/policycheck/facts/internal/jsonvalue"
)

// SentValues answers, from a history's tool calls (ToolCalls, or
// input.facts.tool_calls read back from a logged input), what
// Flow.EchoOfTheAgent answers from a derivation's index: whether a call
// before a place in the history sent a value (Echoes), and whether a
// call of a tool with a tool_call_id came before it. A look-up compares
// the arguments of the calls before the place, in history order (a
// derivation's compares those before the dispatched response: within
// the budgets both answer alike), under
// the same comparison budgets: FlowCallCompareBudget for each call being
// judged (StartCall), FlowResponseCompareBudget for all of them. Past a
// budget SentBefore answers true (a return cannot vouch for what was not
// checked); what it reads is bounded by the budget, however many values
// are looked up. Not safe for concurrent use.
type SentValues struct {
	calls []ToolCallRecord // until indexed (index)
	log   sentArgs
	at    []Position // parallel to log.args
	// called holds, for each tool and tool_call_id, the earliest call.
	called map[sentCall]Position
	b      flowBudget
}

type sentCall struct{ tool, id string }

// NewSentValues returns the SentValues of calls, in any order (a logged
// input's are read as given: they are put in history order). Nothing is
// read before the first look-up.
func NewSentValues(calls []ToolCallRecord) *SentValues {
	s := &SentValues{calls: calls, b: flowBudget{response: FlowResponseCompareBudget}}
	s.StartCall()
	return s
}

// index puts the calls in history order, once.
func (s *SentValues) index() {
	if s.called != nil {
		return
	}
	calls := s.calls
	s.calls = nil
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	at := func(i int) Position { return Position{Message: calls[i].Message, Part: calls[i].Part} }
	byPlace := func(a, b int) int { return comparePositions(at(a), at(b)) }
	if !slices.IsSortedFunc(order, byPlace) { // a Tracker's and a derivation's are
		slices.SortStableFunc(order, byPlace)
	}
	s.at, s.called = make([]Position, 0, len(calls)), map[sentCall]Position{}
	for _, i := range order {
		c := &calls[i]
		s.log.args = append(s.log.args, c.Args)
		s.log.echo = append(s.log.echo, nil)
		s.at = append(s.at, at(i))
		if c.ToolCallID != nil {
			k := sentCall{c.Tool, *c.ToolCallID}
			if _, seen := s.called[k]; !seen {
				s.called[k] = at(i)
			}
		}
	}
}

// StartCall gives the next call judged its comparison budget
// (FlowCallCompareBudget), within what is left of the response's.
func (s *SentValues) StartCall() { s.b.startCall() }

// SentBefore reports whether a call before at has v (a string, or a
// number as ArgsValue reads one) in its arguments (Echoes): false when
// none has, or v is neither; true past the comparison budget.
func (s *SentValues) SentBefore(v any, at Position) bool {
	w, ok := jsonvalue.WantValue(v)
	if !ok {
		return false
	}
	s.index()
	// Only the calls before at: a call after it (the dispatched
	// response's own, which may hold every value it sends) cannot have
	// been echoed, and reading it would spend the budget on nothing.
	n := sort.Search(len(s.at), func(i int) bool { return !s.at[i].Before(at) })
	first, ok := s.log.firstOf(w, n, &s.b)
	return !ok || first < n
}

// CalledBefore reports whether a call of tool with tool_call_id id lies
// before at.
func (s *SentValues) CalledBefore(tool, id string, at Position) bool {
	s.index()
	p, ok := s.called[sentCall{tool, id}]
	return ok && p.Before(at)
}

func comparePositions(a, b Position) int {
	switch {
	case a.Before(b):
		return -1
	case b.Before(a):
		return 1
	}
	return 0
}
