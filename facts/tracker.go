package facts

import (
	"slices"
	"sort"
)

// Tracker derives Facts for a history that grows by appended messages.
//
// Appending a message costs time proportional to that message, and Facts
// costs time proportional to the size of the fact sets (distinct tool names
// and capability ids), not to the length of the history: the tracker keeps,
// for the conservative window and for each provider that has produced a
// wire-boundary compaction, the evidence accumulated since that window's
// start. The last message, when it is a response, is held apart so that its
// dispatch facts can be read without copying any state.
//
// A Tracker is not safe for concurrent use; the Registry it reads is.
type Tracker struct {
	reg *Registry
	n   int // messages appended, pending one included

	pending *Message // last message when it is a response, not yet folded in

	cons       *window            // conservative window
	all        *window            // the whole history: anchored window with no boundary
	byProvider map[string]*window // anchored window per provider with a boundary
	callIDs    map[string]struct{}
	// outcomes holds, per tool_call_id, the first tool-return or
	// retry-prompt part with it (Call.Answered).
	outcomes map[string]Position
	// opts are the optional facts the tracker keeps (NewTracker).
	opts Options
	// log holds the tool calls of the folded messages (Facts.ToolCalls)
	// and their summary per tool (Facts.ReturnsByTool) when opts asks
	// for either.
	log callLog
	// flows indexes the returns of the folded messages when opts asks
	// for flows (nil otherwise).
	flows *flowIndex
	// vouch, when set, removes the evidence its Voucher does not vouch
	// for from each message as it is appended (NewTracker with VouchedBy).
	vouch *vouching
}

// window accumulates the evidence found from its start on.
type window struct {
	start    Position
	disc     map[string]struct{}
	calls    map[string]string // load call id → capability id
	loaded   map[string]struct{}
	returned map[string]struct{} // conservative window only
	discOut  map[string]struct{} // conservative window only: cleaned reveals
	// The sets above sorted, as Facts last made them; nil once a set
	// has grown (see add). A run's step reads them at every message,
	// and they change far less often: sorting a thousand names each
	// time took a 1,000-tool run step 7% of its CPU.
	sortedDisc, sortedLoaded, sortedReturned, sortedDiscOut []string
}

// add puts name in set, and drops *sorted, the set's sorted form, when
// name is new to it.
func add(set map[string]struct{}, name string, sorted *[]string) {
	if _, ok := set[name]; !ok {
		set[name] = struct{}{}
		*sorted = nil
	}
}

// sortedOf returns set's names sorted, in a slice the caller owns (Facts'
// callers may insert into it), keeping the sorted form in *sorted.
func sortedOf(set map[string]struct{}, sorted *[]string) []string {
	if *sorted == nil {
		*sorted = sortedKeys(set)
	}
	return slices.Clone(*sorted)
}

func newWindow(start Position, conservative bool) *window {
	w := &window{
		start:  start,
		disc:   map[string]struct{}{},
		calls:  map[string]string{},
		loaded: map[string]struct{}{},
	}
	if conservative {
		w.returned = map[string]struct{}{}
		w.discOut = map[string]struct{}{}
	}
	return w
}

// NewTracker returns a tracker for an empty history. With Options, it
// keeps the optional facts they ask for, at their cost per appended
// message (the tool calls keep each call's arguments, which alias the
// decoded messages). With VouchedBy, it reads each appended message
// without the evidence the voucher does not vouch for (VouchHistory) and
// Facts lists that evidence in Unvouched; it then equals Derive with the
// same voucher over the same history when the voucher answers each claim
// as it did when the claim's message was appended.
func NewTracker(reg *Registry, opts ...Option) *Tracker {
	s := settingsOf(opts)
	o := s.opts
	var fx *flowIndex
	if o.Flows {
		fx = newFlowIndex(o)
		// A session's look-ups of what the agent sent start where the
		// value may first appear (sentArgs.grams).
		fx.calls.grams, fx.calls.numKeys = map[uint32]int32{}, map[string]int32{}
	}
	t := &Tracker{
		flows:      fx,
		opts:       o,
		reg:        reg,
		cons:       newWindow(Position{}, true),
		all:        newWindow(Position{}, false),
		byProvider: map[string]*window{},
		callIDs:    map[string]struct{}{},
		outcomes:   map[string]Position{},
	}
	if s.vouch != nil {
		t.vouch = newVouching(s.vouch)
	}
	return t
}

// Options returns the optional facts the tracker keeps.
func (t *Tracker) Options() Options { return t.opts }

// Len returns the number of messages appended so far.
func (t *Tracker) Len() int { return t.n }

// Append adds messages to the end of the tracked history. The tracker keeps
// references to the messages; callers must not modify them afterwards.
func (t *Tracker) Append(msgs ...Message) {
	for i := range msgs {
		if t.pending != nil {
			t.fold(t.pending, t.n-1)
			t.pending = nil
		}
		m := &msgs[i]
		if t.vouch != nil {
			m = t.vouch.message(m, t.n)
		}
		if m.Kind == Response {
			t.pending = m
		} else {
			t.fold(m, t.n)
		}
		t.n++
	}
}

// fold applies message m at index idx to every window.
func (t *Tracker) fold(m *Message, idx int) {
	if t.opts.ToolCalls || t.opts.ReturnsByTool {
		t.log.fold(m, idx)
	}
	if t.flows != nil {
		t.flows.fold(m, idx, t.reg)
	}
	for p := range m.Parts {
		part := &m.Parts[p]
		if part.Kind == Compaction {
			pos := Position{idx, p}
			t.cons = newWindow(pos, true)
			if part.HasProvider && part.HasPayload {
				t.byProvider[part.Provider] = newWindow(pos, false)
			}
		}
		if part.isOutcome() {
			if _, seen := t.outcomes[part.ToolCallID]; !seen {
				t.outcomes[part.ToolCallID] = Position{idx, p}
			}
		}
		orphan := false
		switch part.Kind {
		case ToolCall:
			if part.HasToolCallID {
				t.callIDs[part.ToolCallID] = struct{}{}
			}
		case ToolReturn:
			if part.HasToolCallID {
				_, seen := t.callIDs[part.ToolCallID]
				orphan = !seen
			} else {
				orphan = true
			}
			if part.Outcome == OutcomeSuccess {
				add(t.cons.returned, part.ToolName, &t.cons.sortedReturned)
			}
		}
		t.cons.apply(part)
		if !orphan {
			for _, n := range part.Reveals {
				add(t.cons.discOut, n, &t.cons.sortedDiscOut)
			}
		}
		t.all.apply(part)
		for _, w := range t.byProvider {
			w.apply(part)
		}
	}
}

func (w *window) apply(part *Part) {
	for _, n := range part.Reveals {
		add(w.disc, n, &w.sortedDisc)
	}
	if part.ToolKind != ToolKindLoad || !part.HasToolCallID {
		return
	}
	switch part.Kind {
	case ToolCall:
		if part.HasLoadID {
			w.calls[part.ToolCallID] = part.LoadID
		}
	case ToolReturn:
		if id, ok := w.calls[part.ToolCallID]; ok {
			add(w.loaded, id, &w.sortedLoaded)
		}
	}
}

// FactsWith returns the facts of the history appended so far with the
// optional facts o asks for that the tracker keeps (Options); one it does
// not keep stays nil. With o within Options, it equals Derive with o over
// the same history.
func (t *Tracker) FactsWith(o Options) Facts {
	f := t.Facts()
	if o.ToolCalls && t.opts.ToolCalls {
		f.ToolCalls, f.BuiltinReturns, f.UnpairedReturns = t.log.snapshot(), t.log.builtinSnapshot(), t.log.unpairedSnapshot()
		if t.pending != nil {
			// The response not yet folded: its calls have no outcome.
			pl := callLog{}
			pl.fold(t.pending, t.n-1)
			f.ToolCalls = append(f.ToolCalls, pl.calls...)
			f.BuiltinReturns = append(f.BuiltinReturns, pl.builtins...)
		}
	}
	if o.ReturnsByTool && t.opts.ReturnsByTool {
		// Kept as the messages arrive: a step costs the tools, not the
		// calls. The response not yet folded adds its provider-side
		// returns (its calls have no outcome).
		var pending []BuiltinReturn
		if t.pending != nil {
			pl := callLog{}
			pl.fold(t.pending, t.n-1)
			pending = pl.builtins
		}
		f.ReturnsByTool = t.log.byTool.snapshot(pending)
	}
	if o.Flows && t.flows != nil && o.flowMinLength() == t.flows.minLen && o.flowIndexCap() == t.flows.cap && o.FlowTokens == t.flows.tokens {
		f.FlowIndexTruncated = t.flows.truncated
		if f.Dispatch != nil {
			f.FlowIndexTruncated = dispatchFlows(t.flows, t.pending, t.n-1, f.Dispatch.Calls, nil, t.reg)
		}
	}
	return f
}

// Facts returns the facts of the history appended so far. It equals
// Derive over the same history.
func (t *Tracker) Facts() Facts {
	f := t.facts()
	if t.vouch != nil {
		f.Unvouched = slices.Clone(nonNilUnvouched(t.vouch.out))
	}
	return f
}

func (t *Tracker) facts() Facts {
	R := t.pending
	if R == nil {
		loaded := sortedOf(t.cons.loaded, &t.cons.sortedLoaded)
		return Facts{
			Window:             t.cons.start,
			Discovered:         sortedOf(t.cons.disc, &t.cons.sortedDisc),
			Loaded:             loaded,
			Returned:           sortedOf(t.cons.returned, &t.cons.sortedReturned),
			ActiveCapabilities: t.reg.activeFor(loaded, nil),
			Outgoing:           Outgoing{Discovered: sortedOf(t.cons.discOut, &t.cons.sortedDiscOut), Loaded: loaded},
		}
	}
	r := t.n - 1
	last := -1 // R's latest compaction part
	for p := len(R.Parts) - 1; p >= 0; p-- {
		if R.Parts[p].Kind == Compaction {
			last = p
			break
		}
	}
	var f Facts
	dispatchLoaded := sortedOf(t.cons.loaded, &t.cons.sortedLoaded)
	if last >= 0 {
		// The conservative window starts inside R: only R's own parts from
		// the compaction on count, and a response holds no returns.
		disc := map[string]struct{}{}
		for p := last; p < len(R.Parts); p++ {
			for _, n := range R.Parts[p].Reveals {
				disc[n] = struct{}{}
			}
		}
		names := sortedKeys(disc)
		f = Facts{
			Window:     Position{r, last},
			Discovered: names,
			Loaded:     []string{},
			Returned:   []string{},
			Outgoing:   Outgoing{Discovered: names, Loaded: []string{}},
		}
	} else {
		disc := sortedOf(t.cons.disc, &t.cons.sortedDisc)
		out := sortedOf(t.cons.discOut, &t.cons.sortedDiscOut)
		for p := range R.Parts {
			disc = union(disc, R.Parts[p].Reveals)
			out = union(out, R.Parts[p].Reveals)
		}
		f = Facts{
			Window:     t.cons.start,
			Discovered: disc,
			Loaded:     dispatchLoaded,
			Returned:   sortedOf(t.cons.returned, &t.cons.sortedReturned),
			Outgoing:   Outgoing{Discovered: out, Loaded: dispatchLoaded},
		}
	}
	f.ActiveCapabilities = t.reg.activeFor(f.Loaded, nil)

	d := &Dispatch{Loaded: dispatchLoaded}
	if !R.HasProvider {
		d.Window = f.Window
		d.Evidence = Evidence{Discovered: []string{}, Loaded: []string{}}
	} else {
		p := R.Provider
		d.Provider = &p
		w := t.byProvider[p]
		if w == nil {
			w = t.all
		}
		d.Window = w.start
		// Compaction parts inside R are never the anchored boundary, so
		// every reveal of R counts.
		anchored := sortedOf(w.disc, &w.sortedDisc)
		for i := range R.Parts {
			anchored = union(anchored, R.Parts[i].Reveals)
		}
		d.Evidence.Discovered = minus(anchored, f.Discovered)
		evLoaded := []string{}
		for id := range w.loaded {
			if _, had := t.cons.loaded[id]; !had && t.reg.IsDeferred(id) {
				evLoaded = append(evLoaded, id)
			}
		}
		sort.Strings(evLoaded)
		d.Evidence.Loaded = evLoaded
	}
	d.ActiveCapabilities = t.reg.activeFor(d.Loaded, d.Evidence.Loaded)
	d.SameResponse, d.Calls = sameResponse(R)
	for i := range d.Calls {
		if id := d.Calls[i].ToolCallID; id != nil {
			if at, ok := t.outcomes[*id]; ok {
				d.Calls[i].Answered = &at
			}
		}
	}
	f.Dispatch = d
	return f
}

// union returns sorted a ∪ names for sorted a; names need not be sorted.
func union(a []string, names []string) []string {
	for _, n := range names {
		i, found := slices.BinarySearch(a, n)
		if !found {
			a = slices.Insert(a, i, n)
		}
	}
	return a
}
