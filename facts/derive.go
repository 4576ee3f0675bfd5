package facts

import (
	"slices"
	"sort"
)

// Facts is what policies decide on (docs/decision.md, "facts" and "dispatch"). Every name list is
// sorted and never nil.
type Facts struct {
	// Window is the start of the conservative post-compaction window of the
	// whole history (spec §2.1).
	Window Position
	// Discovered is Discovered(window) (spec §3): raw reveal evidence.
	Discovered []string
	// Loaded is Loaded(window) (spec §4), raw: it may name unregistered ids.
	Loaded []string
	// Returned names the tools with a successful tool-return in the window.
	Returned []string
	// ActiveCapabilities is always-on ∪ (Loaded ∩ deferred): the active set
	// of the next request.
	ActiveCapabilities []string
	// Outgoing is the reveal state of the history as the reference sends it
	// on the next request, after cleaning (spec ADV1): the basis of
	// advertisement.
	Outgoing Outgoing
	// Dispatch is present when the last message is a response: the facts
	// its tool calls are judged against.
	Dispatch *Dispatch
	// ToolCalls are the tool calls of the whole history (ToolCalls), the
	// dispatched response's included (pending); nil unless asked for
	// (Options.ToolCalls).
	ToolCalls []ToolCallRecord
	// BuiltinReturns are the provider-side tool returns of the whole
	// history, the dispatched response's included; nil unless asked for
	// (Options.ToolCalls).
	BuiltinReturns []BuiltinReturn
	// UnpairedReturns are the returns of the whole history that answer
	// no call (UnpairedReturn); nil unless asked for (Options.ToolCalls).
	UnpairedReturns []UnpairedReturn
	// ReturnsByTool summarises, one entry per tool, the returns the
	// model was shown in the whole history (ToolReturns), in history
	// order of each tool's latest; nil unless asked for
	// (Options.ReturnsByTool). The engine builds input.call.window from
	// it: its size is bounded by the tools, not by the calls.
	ReturnsByTool []ToolReturns
	// ReturnsLabel, when not nil, is the join of the labels of every
	// return the model was shown as an input document recorded it
	// (input.call.window's untrusted and confidentiality): set, with
	// each ReturnsByTool entry's Label, when engine.FactsFromInput reads
	// the window back from a document without input.facts.tool_calls,
	// so that a logged decision is decided again on the window it had.
	// Nil when derived: the engine joins the registry's labels.
	ReturnsLabel *Label
	// FlowIndexTruncated says that the flows may be incomplete: the index
	// of return strings the flows are found in reached its cap
	// (Options.FlowIndexCap) and left out the returns after that point,
	// or the matching of a call's arguments stopped at one of its bounds
	// (FlowCallCompareBudget, FlowResponseCompareBudget,
	// FlowCallMaxFlows, FlowResponseMaxFlows): a flow from
	// them is not reported. Always false unless Options.Flows asks for
	// flows.
	FlowIndexTruncated bool
	// Unvouched is the evidence a Voucher did not vouch for, in history
	// order (VouchedBy): it counts for nothing above. Nil when no Voucher
	// was asked.
	Unvouched []Unvouched
}

// Outgoing holds facts of the cleaned outgoing history (spec ADV1–ADV2).
type Outgoing struct {
	Discovered []string
	Loaded     []string
}

// Dispatch holds the facts for the tool calls of the last response R.
type Dispatch struct {
	// Provider is R's provider_name, nil when null.
	Provider *string
	// Window is the provider-anchored window for R (spec §2.3); the
	// conservative window when R has no provider.
	Window Position
	// Loaded is Loaded(window of the history without R): loads are read
	// before the response (spec L5, X7).
	Loaded []string
	// Evidence is what the serving provider could still see although the
	// conservative window dropped it (spec §5), narrowed to deferred ids (docs/semantics.md).
	Evidence Evidence
	// ActiveCapabilities is always-on ∪ (Loaded ∩ deferred) ∪ Evidence.Loaded
	// (seed 000: the one activity set of dispatch).
	ActiveCapabilities []string
	// SameResponse is what R itself holds (spec X7).
	SameResponse SameResponse
	// Calls are R's tool-call parts in order.
	Calls []Call
}

// Evidence is the anchored evidence of spec §5.
type Evidence struct {
	// Discovered is Discovered(anchored window) − Facts.Discovered.
	Discovered []string
	// Loaded is (Loaded(anchored window) − Dispatch.Loaded) ∩ deferred.
	Loaded []string
}

// SameResponse is what the dispatched response reveals and loads by itself.
type SameResponse struct {
	// Revealed names the tools a provider-side search inside R revealed:
	// they count for R's calls.
	Revealed []string
	// PendingLoads names the capabilities R's typed load calls ask for:
	// they do not count for R's calls (the load has not executed yet).
	PendingLoads []string
}

// Call is one tool-call part of the dispatched response.
type Call struct {
	// Part is the index of the part in the response.
	Part int
	Tool string
	// ToolCallID is nil when the part has none.
	ToolCallID *string
	ToolKind   ToolKind
	// Args is the raw JSON of the call's args (object, string or null).
	Args []byte
	// Answered is the first part before the response that holds an
	// outcome for the call's tool_call_id (a tool-return or retry-prompt
	// part with that id), nil when there is none or the call has no id:
	// a call that repeats an answered id repeats an earlier call, and an
	// approval keyed by the id was for that one (engine: an approval
	// authorises one call occurrence).
	Answered *Position
	// Flows are the argument values that came from earlier tool returns
	// (flows.go); nil unless asked for (Options.Flows), never nil then.
	Flows []Flow
	// ArgsIntegrity is nil when derived. engine.FactsFromInput sets it to
	// the integrity of each argument (JSON pointer -> trusted,
	// declassified or untrusted) an input document recorded, when the
	// document carries no input.facts.tool_calls to judge it again from,
	// so that a logged decision is decided again on what it had.
	ArgsIntegrity map[string]string
}

// ConservativeWindow returns the start of the conservative post-compaction
// window of h (spec C1–C2): the latest compaction part of any response,
// whatever its provider or payload; {0, 0} when there is none.
func ConservativeWindow(h History) Position {
	for m := len(h) - 1; m >= 0; m-- {
		if h[m].Kind != Response {
			continue
		}
		parts := h[m].Parts
		for p := len(parts) - 1; p >= 0; p-- {
			if parts[p].Kind == Compaction {
				return Position{m, p}
			}
		}
	}
	return Position{}
}

// AnchoredWindow returns the start of the provider-anchored window for the
// last message of h, which must be a response R (spec C6–C7): with no
// provider on R, the conservative window; otherwise the latest compaction
// part strictly before R that is a wire boundary for R's provider, or {0, 0}.
func AnchoredWindow(h History) Position {
	r := len(h) - 1
	if r < 0 || h[r].Kind != Response || !h[r].HasProvider {
		return ConservativeWindow(h)
	}
	prov := h[r].Provider
	for m := r - 1; m >= 0; m-- {
		parts := h[m].Parts
		for p := len(parts) - 1; p >= 0; p-- {
			if parts[p].isBoundaryFor(prov) {
				return Position{m, p}
			}
		}
	}
	return Position{}
}

// backwardBudget bounds the parts discoveredAndOutgoing examines looking
// backwards for the calls of revealing returns, so that a history of
// returns without calls costs one forward walk more, never a walk per
// return.
const backwardBudget = 4096

// callBefore reports whether a tool-call part with id comes before at,
// looking backwards from at and spending one unit of budget per part;
// settled is false when the budget ran out first.
func callBefore(h History, at Position, id string, budget *int) (found, settled bool) {
	for m := at.Message; m >= 0; m-- {
		p := len(h[m].Parts)
		if m == at.Message {
			p = at.Part
		}
		for p--; p >= 0; p-- {
			if *budget <= 0 {
				return false, false
			}
			*budget--
			part := &h[m].Parts[p]
			if part.Kind == ToolCall && part.HasToolCallID && part.ToolCallID == id {
				return true, true
			}
		}
	}
	return false, true
}

// walk calls fn for every part of h from start on, in order.
func walk(h History, start Position, fn func(m, p int, part *Part)) {
	for m := start.Message; m < len(h); m++ {
		p0 := 0
		if m == start.Message {
			p0 = start.Part
		}
		for p := p0; p < len(h[m].Parts); p++ {
			fn(m, p, &h[m].Parts[p])
		}
	}
}

// Discovered returns the sorted names revealed from start on (spec D1).
func Discovered(h History, start Position) []string {
	set := map[string]struct{}{}
	walk(h, start, func(_, _ int, part *Part) {
		for _, n := range part.Reveals {
			set[n] = struct{}{}
		}
	})
	return sortedKeys(set)
}

// Loaded returns the sorted capability ids whose typed load call and return
// both lie at or after start (spec L1–L3).
func Loaded(h History, start Position) []string {
	calls := map[string]string{}
	set := map[string]struct{}{}
	walk(h, start, func(_, _ int, part *Part) {
		if part.ToolKind != ToolKindLoad || !part.HasToolCallID {
			return
		}
		switch part.Kind {
		case ToolCall:
			if part.HasLoadID {
				calls[part.ToolCallID] = part.LoadID
			}
		case ToolReturn:
			if id, ok := calls[part.ToolCallID]; ok {
				set[id] = struct{}{}
			}
		}
	})
	return sortedKeys(set)
}

// Derive computes the facts of h by transcribing the reference rules
// literally: each window is located first, then parsed. It is the
// specification the incremental Tracker is tested against. Of the
// optional facts, it fills those its options ask for (Options); with
// VouchedBy, it derives over h without the evidence the voucher does not
// vouch for (VouchHistory) and lists that evidence in Facts.Unvouched.
func Derive(h History, reg *Registry, opts ...Option) Facts {
	s := settingsOf(opts)
	var unv []Unvouched
	if s.vouch != nil {
		h, unv = VouchHistory(h, s.vouch)
	}
	f := derive(h, reg)
	switch {
	case s.opts.ToolCalls:
		l := callLog{}
		for m := range h {
			l.fold(&h[m], m)
		}
		f.ToolCalls, f.BuiltinReturns, f.UnpairedReturns = l.snapshot(), l.builtinSnapshot(), l.unpairedSnapshot()
		if s.opts.ReturnsByTool {
			f.ReturnsByTool = l.byTool.snapshot(nil)
		}
	case s.opts.ReturnsByTool:
		// Without the calls (the stock library's window): the summary
		// alone, which costs a never-seen decision a seventh less CPU
		// than folding the call log (BenchmarkFlows, flows=stock).
		f.ReturnsByTool = returnsByTool(h)
	}
	if s.opts.Flows {
		f.FlowIndexTruncated = flowsOf(h, reg, s.opts, f.Dispatch)
	}
	if s.vouch != nil {
		f.Unvouched = unv
	}
	return f
}

// Option is an optional part of a derivation (Derive, NewTracker): an
// Options value, the optional facts to derive, or VouchedBy, the
// evidence to count. A later option replaces an earlier one of its kind.
type Option interface{ isOption() }

// settings are a derivation's options.
type settings struct {
	opts  Options
	vouch Voucher
}

// settingsOf reads the options with a type switch, not a method: the
// options then stay on the caller's stack.
func settingsOf(opts []Option) settings {
	var s settings
	for _, o := range opts {
		switch o := o.(type) {
		case Options:
			s.opts = o
		case vouchedBy:
			s.vouch = o.v
		}
	}
	return s
}

func (Options) isOption() {}

type vouchedBy struct{ v Voucher }

func (vouchedBy) isOption() {}

// VouchedBy makes a reveal or a load count only where v vouches for the
// call that produced it (verified evidence, VouchHistory); the rest is
// listed in Facts.Unvouched. A nil v vouches for nothing and lists
// nothing: every piece counts, as without the option.
func VouchedBy(v Voucher) Option { return vouchedBy{v} }

// flowsOf fills the flows of d's calls (d may be nil) from the returns of
// h and reports whether the index was truncated. It indexes only the
// returns that may hold a match (flowFilter) and falls back to indexing
// every return when that does not end complete (flowfilter.go).
func flowsOf(h History, reg *Registry, o Options, d *Dispatch) bool {
	var calls []Call
	if d != nil {
		calls = d.Calls
	}
	// The calls' arguments, read once for the filter and the matching
	// (and the matching again when the filter's derivation falls back).
	vals := argsValues(calls)
	if f := newFlowFilter(o, calls, vals); f != nil {
		if trunc, ok := filteredFlowsOf(h, reg, o, d, vals, f); ok {
			return trunc
		}
	}
	return fullFlowsOf(h, reg, o, d, vals)
}

// fullFlowsOf is flowsOf indexing every return; vals are d's calls'
// arguments (argsValues).
func fullFlowsOf(h History, reg *Registry, o Options, d *Dispatch, vals []any) bool {
	x := newFlowIndex(o)
	r := len(h)
	if d != nil {
		r--
	}
	for m := 0; m < r; m++ {
		x.fold(&h[m], m, reg)
	}
	if d == nil {
		return x.truncated
	}
	return dispatchFlows(x, &h[r], r, d.Calls, vals, reg)
}

// filteredFlowsOf is flowsOf indexing the returns f passes, the others
// counted against the cap by their skipBound; ok is false when the
// flows may differ from fullFlowsOf's: the index or the matching did not
// end complete.
func filteredFlowsOf(h History, reg *Registry, o Options, d *Dispatch, vals []any, f *flowFilter) (trunc, ok bool) {
	x := newFlowIndex(o)
	r := len(h)
	if d != nil {
		r--
	}
	noted := 0 // the calls of h[:noted] are noted
	for m := 0; m < r; m++ {
		var beside []string
		for p := range h[m].Parts {
			part := &h[m].Parts[p]
			if !isFlowSource(part) || len(part.Content) == 0 {
				continue
			}
			if f.pass(part.Content) {
				if beside == nil {
					beside = besideOf(&h[m])
				}
				// The calls are noted only up to an indexed source: what
				// it may echo of them.
				for ; noted < m; noted++ {
					x.noteCalls(&h[noted])
				}
				x.addPart(part, Position{m, p}, reg, beside)
			} else {
				x.used += fastBound(part.Content, x.tokens)
			}
			if x.truncated || x.used > x.cap {
				return false, false
			}
		}
	}
	if d == nil {
		return false, true
	}
	if dispatchFlows(x, &h[r], r, d.Calls, vals, reg) {
		return false, false
	}
	return false, true
}

// Flows returns, for the calls of the response h ends with (in order),
// the argument values that came from earlier returns, and whether the
// index was truncated: the flows Derive fills for o. Nil calls when
// h does not end with a response.
func Flows(h History, reg *Registry, o Options) ([][]Flow, bool) {
	if len(h) == 0 || h[len(h)-1].Kind != Response {
		return nil, flowsOf(h, reg, o, nil)
	}
	_, calls := sameResponse(&h[len(h)-1])
	d := &Dispatch{Calls: calls}
	trunc := flowsOf(h, reg, o, d)
	out := make([][]Flow, len(calls))
	for i := range calls {
		out[i] = calls[i].Flows
	}
	return out, trunc
}

func derive(h History, reg *Registry) Facts {
	w := ConservativeWindow(h)
	disc, outDisc := discoveredAndOutgoing(h, w, reg)
	f := Facts{
		Window:     w,
		Discovered: disc,
		Loaded:     Loaded(h, w),
	}
	returned := newNameSet(reg)
	walk(h, w, func(_, _ int, part *Part) {
		if part.Kind == ToolReturn && part.Outcome == OutcomeSuccess {
			returned.add(part.ToolName)
		}
	})
	f.Returned = returned.sorted()
	f.ActiveCapabilities = reg.activeFor(f.Loaded, nil)
	f.Outgoing = Outgoing{Discovered: outDisc, Loaded: f.Loaded}

	r := len(h) - 1
	if r < 0 || h[r].Kind != Response {
		return f
	}
	R := &h[r]
	hm := h[:r]
	d := &Dispatch{
		Window: AnchoredWindow(h),
		Loaded: Loaded(hm, ConservativeWindow(hm)),
	}
	if R.HasProvider {
		p := R.Provider
		d.Provider = &p
	}
	// Discovered(h, d.Window) − f.Discovered, without walking what both
	// windows share: a window that starts later reveals nothing more, and
	// one that starts earlier adds only the reveals before w.
	d.Evidence.Discovered = []string{}
	if d.Window.Before(w) {
		seg := map[string]struct{}{}
		for m := d.Window.Message; m <= w.Message && m < len(h); m++ {
			p0 := 0
			if m == d.Window.Message {
				p0 = d.Window.Part
			}
			for p := p0; p < len(h[m].Parts) && (Position{m, p}).Before(w); p++ {
				for _, n := range h[m].Parts[p].Reveals {
					seg[n] = struct{}{}
				}
			}
		}
		d.Evidence.Discovered = minus(sortedKeys(seg), f.Discovered)
	}
	var evLoaded []string
	for _, id := range minus(Loaded(h, d.Window), d.Loaded) {
		if reg.IsDeferred(id) {
			evLoaded = append(evLoaded, id)
		}
	}
	d.Evidence.Loaded = nonNil(evLoaded)
	d.ActiveCapabilities = reg.activeFor(d.Loaded, d.Evidence.Loaded)
	d.SameResponse, d.Calls = sameResponse(R)
	answered(hm, d.Calls)
	f.Dispatch = d
	return f
}

// answered sets Answered on the calls whose tool_call_id some
// tool-return or retry-prompt part of h holds, to the first such part.
// It walks h only when a call has an id.
func answered(h History, calls []Call) {
	ids := map[string][]int{}
	for i, c := range calls {
		if c.ToolCallID != nil {
			ids[*c.ToolCallID] = append(ids[*c.ToolCallID], i)
		}
	}
	if len(ids) == 0 {
		return
	}
	walk(h, Position{}, func(m, p int, part *Part) {
		if !part.isOutcome() {
			return
		}
		for _, i := range ids[part.ToolCallID] {
			if calls[i].Answered == nil {
				calls[i].Answered = &Position{m, p}
			}
		}
	})
}

// discoveredAndOutgoing returns Discovered(h, w) and Discovered over the
// window of the cleaned outgoing history (spec ADV1 a), in one walk of the
// window: a search return whose tool_call_id never appeared on a tool-call
// part of an earlier message is an orphan and is dropped from the second.
// Dangling-call repair adds only untyped returns and merging changes no
// evidence, so neither needs modelling here. When cleaning dropped no
// reveal, both are the same slice.
func discoveredAndOutgoing(h History, w Position, reg *Registry) (disc, out []string) {
	all := newNameSet(reg)
	kept := newNameSet(reg) // reveals cleaning keeps for sure
	dropped := false        // some reveal is not (yet) known to be kept
	// The window's search returns, held by id until their calls are found:
	// most histories have far more calls than reveals, so only the ids of
	// revealing returns are looked for.
	type pending struct {
		at      Position
		reveals []string
	}
	var held map[string][]pending
	walk(h, w, func(m, p int, part *Part) {
		if len(part.Reveals) == 0 {
			return
		}
		for _, n := range part.Reveals {
			all.add(n)
		}
		switch {
		case part.Kind == ToolCall, part.Kind == ToolReturn && !part.HasToolCallID:
			dropped = true
		case part.Kind == ToolReturn:
			if held == nil {
				held = map[string][]pending{}
			}
			held[part.ToolCallID] = append(held[part.ToolCallID], pending{Position{m, p}, part.Reveals})
		default:
			for _, n := range part.Reveals {
				kept.add(n)
			}
		}
	})
	if len(held) > 0 {
		// A held return counts when the first tool-call part with its id
		// comes before it, that is, when any call with its id does. The
		// call is nearly always a message or two back, so look backwards
		// from each return first, within a budget; what the budget does
		// not settle is settled by one forward walk over the history, as
		// before.
		budget := backwardBudget
		for id, rets := range held {
			var left []pending
			for _, r := range rets {
				found, settled := callBefore(h, r.at, id, &budget)
				switch {
				case !settled:
					left = append(left, r)
				case found:
					for _, n := range r.reveals {
						kept.add(n)
					}
				default:
					dropped = true
				}
			}
			if len(left) == 0 {
				delete(held, id)
			} else {
				held[id] = left
			}
		}
	}
	if len(held) > 0 {
		// The first call with a held return's id decides.
		walk(h, Position{}, func(m, p int, part *Part) {
			if part.Kind != ToolCall || !part.HasToolCallID {
				return
			}
			rets, ok := held[part.ToolCallID]
			if !ok {
				return
			}
			call := Position{m, p}
			for _, r := range rets {
				if call.Before(r.at) {
					for _, n := range r.reveals {
						kept.add(n)
					}
				} else {
					dropped = true
				}
			}
			delete(held, part.ToolCallID)
		})
		if len(held) > 0 { // returns whose id no call carries
			dropped = true
		}
	}
	disc = all.sorted()
	if !dropped || kept.len() == all.len() {
		return disc, disc
	}
	return disc, kept.sorted()
}

func sameResponse(R *Message) (SameResponse, []Call) {
	revealed := map[string]struct{}{}
	loads := map[string]struct{}{}
	calls := []Call{}
	for i := range R.Parts {
		part := &R.Parts[i]
		if part.Kind == BuiltinToolReturn {
			for _, n := range part.Reveals {
				revealed[n] = struct{}{}
			}
		}
		if part.Kind != ToolCall {
			continue
		}
		if part.ToolKind == ToolKindLoad && part.HasLoadID {
			loads[part.LoadID] = struct{}{}
		}
		c := Call{Part: i, Tool: part.ToolName, ToolKind: part.ToolKind, Args: part.Args}
		if part.HasToolCallID {
			id := part.ToolCallID
			c.ToolCallID = &id
		}
		calls = append(calls, c)
	}
	return SameResponse{Revealed: sortedKeys(revealed), PendingLoads: sortedKeys(loads)}, calls
}

func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// minus returns the sorted a − b for sorted a and b.
func minus(a, b []string) []string {
	out := make([]string, 0)
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nameSet is a set of tool names built while deriving: a registry tool is
// a flag at its place in the registry's sorted names, anything else goes
// to a map. Adding a registry tool reads a map instead of writing one, and
// the sorted list is read off the flags instead of sorted: with a large
// registry and many reveals, map writes and sorting were most of Derive.
type nameSet struct {
	names []string       // the registry's sorted tool names
	rank  map[string]int // name -> index in names
	flags []bool
	n     int
	other map[string]struct{}
}

func newNameSet(reg *Registry) *nameSet {
	s := &nameSet{}
	if reg != nil {
		s.names, s.rank = reg.toolNames, reg.rank
	}
	return s
}

func (s *nameSet) add(name string) {
	if i, ok := s.rank[name]; ok {
		if s.flags == nil {
			s.flags = make([]bool, len(s.names))
		}
		if !s.flags[i] {
			s.flags[i] = true
			s.n++
		}
		return
	}
	if s.other == nil {
		s.other = map[string]struct{}{}
	}
	s.other[name] = struct{}{}
}

func (s *nameSet) len() int { return s.n + len(s.other) }

// sorted returns the names, sorted: the flagged registry names in their
// order, merged with the other names, sorted on their own.
func (s *nameSet) sorted() []string {
	out := make([]string, 0, s.len())
	var other []string
	if len(s.other) > 0 {
		other = make([]string, 0, len(s.other))
		for n := range s.other {
			other = append(other, n)
		}
		sort.Strings(other)
	}
	j := 0
	if s.n > 0 {
		for i, set := range s.flags {
			if !set {
				continue
			}
			name := s.names[i]
			for j < len(other) && other[j] < name {
				out = append(out, other[j])
				j++
			}
			out = append(out, name)
		}
	}
	return append(out, other[j:]...)
}
