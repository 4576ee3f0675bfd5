package facts

import (
	"maps"
	"slices"
)

// Options, an Option of Derive and NewTracker, asks for the facts that
// cost more than the others and that only some policies read. The zero
// value asks for none.
type Options struct {
	// ToolCalls fills Facts.ToolCalls, Facts.BuiltinReturns and
	// Facts.UnpairedReturns.
	ToolCalls bool
	// ReturnsByTool fills Facts.ReturnsByTool: per tool, what the model
	// was shown of its returns (what input.call.window is built from),
	// without the calls themselves.
	ReturnsByTool bool
	// Flows fills Call.Flows of the dispatched calls and
	// Facts.FlowIndexTruncated (flows.go).
	Flows bool
	// FlowMinLength is the shortest return string, in bytes, an argument
	// is matched against; 0 means DefaultFlowMinLength.
	FlowMinLength int
	// FlowIndexCap bounds the bytes of return strings indexed per
	// history; 0 means DefaultFlowIndexCap.
	FlowIndexCap int
	// FlowTokens indexes the sources' strings by token too (lines, pair
	// values, runs, emails, URLs, IBANs, digit runs; flowtokens.go): an
	// argument holding one flows with match FlowToken. The tokens'
	// bytes count against FlowIndexCap.
	FlowTokens bool
}

// CallOutcome is what became of a tool call (ToolCallRecord.Outcome).
type CallOutcome uint8

// Call outcomes.
const (
	// CallPending: no outcome followed the call (yet), or it has no
	// tool_call_id to pair with one.
	CallPending CallOutcome = iota
	// CallReturned: the first outcome after the call with its
	// tool_call_id is a tool-return (whatever the return's own outcome:
	// success, failed, denied or interrupted).
	CallReturned
	// CallRetried: that first outcome is a retry-prompt: the call was
	// sent back to the model and did not execute.
	CallRetried
)

// String returns the outcome's name in the input document.
func (o CallOutcome) String() string {
	switch o {
	case CallReturned:
		return "returned"
	case CallRetried:
		return "retried"
	}
	return "pending"
}

// ToolCallRecord is one tool-call part of the history (input.facts.tool_calls).
type ToolCallRecord struct {
	Tool string
	// ToolCallID is nil when the part has none.
	ToolCallID *string
	// Message and Part locate the call in the whole history.
	Message, Part int
	// Timestamp is the raw JSON of the call's message's timestamp, nil
	// when it has none.
	Timestamp []byte
	Outcome   CallOutcome
	// Args is the raw JSON of the call's args.
	Args []byte
}

// BuiltinReturn is one provider-side (builtin) tool return of a history:
// content a provider's own tool (a web search, a fetch) put before the
// model, which the agent never called and which is not in ToolCalls. A
// provider's native tool search or capability load (a builtin return
// with a tool_kind) is not one: it names the agent's own tools, as the
// framework's search_tools and load_capability returns do.
type BuiltinReturn struct {
	Tool string
	// ToolCallID is nil when the part has none.
	ToolCallID *string
	// Message and Part locate the return itself in the whole history.
	Message, Part int
}

// UnpairedReturn is one tool return (or retry prompt naming a tool) of a
// history that answers no tool call before it: no call carries its
// tool_call_id, or it has none (a history processor that kept the last
// messages cut the call and kept its return; a provider rewrote the id).
// The model was shown it all the same. A retry prompt that names no tool
// (an output validation error, the framework's words) is not one; nor
// is a second outcome of a call already answered (the call counts).
type UnpairedReturn struct {
	// Tool is the part's tool_name.
	Tool string
	// ToolCallID is nil when the part has none.
	ToolCallID *string
	// Message and Part locate the return itself in the whole history.
	Message, Part int
}

// ToolCalls returns every tool-call part of h in history order, from the
// first message on (a compaction does not hide what was done before it),
// each with its outcome: the kind of the first tool-return or
// retry-prompt part after the call that carries its tool_call_id.
// Builtin (provider-side) tool calls are not tool calls of the agent and
// are not listed. Never nil.
func ToolCalls(h History) []ToolCallRecord {
	l := callLog{}
	for m := range h {
		l.fold(&h[m], m)
	}
	return l.snapshot()
}

// BuiltinReturns returns every provider-side (builtin) tool-return part
// of h without a tool_kind (BuiltinReturn) in history order, from the first message on (a compaction does
// not hide what the model was shown before it). Never nil.
func BuiltinReturns(h History) []BuiltinReturn {
	l := callLog{}
	for m := range h {
		l.fold(&h[m], m)
	}
	return l.builtinSnapshot()
}

// UnpairedReturns returns every return of h that answers no call before
// it (UnpairedReturn), in history order, from the first message on.
// Never nil.
func UnpairedReturns(h History) []UnpairedReturn {
	l := callLog{}
	for m := range h {
		l.fold(&h[m], m)
	}
	return l.unpairedSnapshot()
}

// ToolReturns summarises the returns of one tool the model was shown in
// a history (Facts.ReturnsByTool): those of its calls that have an
// outcome (CallReturned or CallRetried: the return, or the retry prompt
// that answered the call, was put before the model), or, for a
// provider-side tool (Kind BuiltinToolReturn), its returns
// (BuiltinReturn). A compaction hides none of them: what the model saw
// before it reaches it through the summary.
//
// A tool and a provider-side tool of the same name are two entries.
type ToolReturns struct {
	// Kind is ToolReturn for a tool of the agent, BuiltinToolReturn for
	// a provider-side one.
	Kind PartKind
	Tool string
	// Count is the number of the tool's returns the model was shown.
	Count int
	// ToolCallID, Message and Part are the latest of them: for a tool
	// of the agent the call the return answered (ToolCallID is nil when
	// it has none), for a provider-side tool the return itself.
	ToolCallID    *string
	Message, Part int
	// First locates the earliest of them the same way: before a
	// window's start, some of them reach the model only through a
	// compaction summary.
	First Position
	// Unpaired marks the returns of Tool that answer no call
	// (UnpairedReturn): an entry of their own, whose ToolCallID, Message
	// and Part locate the return itself.
	Unpaired bool
	// Label is nil when derived: the tool's returns have the registry's
	// label (Registry.ReturnLabel). engine.FactsFromInput sets it to the
	// label an input document recorded (see Facts.ReturnsLabel).
	Label *Label
}

// ReturnsByToolOf summarises calls, builtins and unpaired returns (as
// ToolCalls, BuiltinReturns and UnpairedReturns return them for a
// history) per tool, as
// Facts.ReturnsByTool does for that history. Never nil.
func ReturnsByToolOf(calls []ToolCallRecord, builtins []BuiltinReturn, unpaired []UnpairedReturn) []ToolReturns {
	var s returnSummary
	for i := range calls {
		if c := &calls[i]; c.Outcome != CallPending {
			s.note(ToolReturn, c.Tool, c.ToolCallID, Position{c.Message, c.Part})
		}
	}
	for _, u := range unpaired {
		s.noteUnpaired(u.Tool, u.ToolCallID, Position{u.Message, u.Part})
	}
	return s.snapshot(builtins)
}

// returnSummary accumulates Facts.ReturnsByTool.
type returnSummary struct {
	index   map[returnKey]int // into entries
	entries []ToolReturns
}

type returnKey struct {
	kind     PartKind
	unpaired bool
	tool     string
}

// note counts one return of tool, whose call (or, provider-side, the
// return itself) is at pos.
func (s *returnSummary) note(kind PartKind, tool string, id *string, pos Position) {
	s.noteKey(returnKey{kind: kind, tool: tool}, id, pos)
}

// noteUnpaired counts one return of tool that answers no call, at pos.
func (s *returnSummary) noteUnpaired(tool string, id *string, pos Position) {
	s.noteKey(returnKey{kind: ToolReturn, unpaired: true, tool: tool}, id, pos)
}

func (s *returnSummary) noteKey(k returnKey, id *string, pos Position) {
	i, ok := s.index[k]
	if !ok {
		if s.index == nil {
			s.index = map[returnKey]int{}
		}
		s.index[k] = len(s.entries)
		s.entries = append(s.entries, ToolReturns{Kind: k.kind, Unpaired: k.unpaired, Tool: k.tool, Count: 1, ToolCallID: id, Message: pos.Message, Part: pos.Part, First: pos})
		return
	}
	e := &s.entries[i]
	e.Count++
	if pos.Before(e.First) {
		e.First = pos
	}
	if !pos.Before(Position{e.Message, e.Part}) {
		e.ToolCallID, e.Message, e.Part = id, pos.Message, pos.Part
	}
}

// snapshot returns the summary with builtins counted too, in history
// order of each entry's latest; never nil. The summary is unchanged.
func (s *returnSummary) snapshot(builtins []BuiltinReturn) []ToolReturns {
	all := s
	if len(builtins) > 0 {
		all = &returnSummary{entries: slices.Clone(s.entries)}
		if len(s.index) > 0 {
			all.index = maps.Clone(s.index)
		}
		for i := range builtins {
			b := &builtins[i]
			all.note(BuiltinToolReturn, b.Tool, b.ToolCallID, Position{b.Message, b.Part})
		}
	}
	out := make([]ToolReturns, len(all.entries))
	copy(out, all.entries)
	slices.SortFunc(out, func(a, b ToolReturns) int {
		if a.Message != b.Message {
			return a.Message - b.Message
		}
		return a.Part - b.Part
	})
	return out
}

// callLog accumulates the tool calls of a history as messages arrive.
type callLog struct {
	calls []ToolCallRecord
	// waiting maps a tool_call_id to the last call with it that no
	// outcome has followed yet (its index + 1); prev[i] links call i to
	// the one before it with the same id (index + 1, 0 for none). A list
	// threaded through the calls costs no allocation per call.
	waiting map[string]int
	prev    []int
	// builtins are the provider-side returns, in history order.
	builtins []BuiltinReturn
	// unpaired are the returns that answer no call, in history order;
	// answered holds the ids of the calls an outcome answered.
	unpaired []UnpairedReturn
	answered map[string]struct{}
	// byTool summarises the returns of both per tool.
	byTool returnSummary
}

func (l *callLog) fold(msg *Message, idx int) {
	for p := range msg.Parts {
		part := &msg.Parts[p]
		switch {
		case part.Kind == ToolCall:
			rec := ToolCallRecord{Tool: part.ToolName, Message: idx, Part: p, Timestamp: msg.Timestamp, Args: part.Args}
			if part.HasToolCallID {
				id := part.ToolCallID
				rec.ToolCallID = &id
				if l.waiting == nil {
					l.waiting = map[string]int{}
				}
				l.prev = append(l.prev, l.waiting[id])
				l.waiting[id] = len(l.calls) + 1
			} else {
				l.prev = append(l.prev, 0)
			}
			l.calls = append(l.calls, rec)
		case part.Kind == BuiltinToolReturn && part.ToolKind == ToolKindNone:
			b := BuiltinReturn{Tool: part.ToolName, Message: idx, Part: p}
			if part.HasToolCallID {
				id := part.ToolCallID
				b.ToolCallID = &id
			}
			l.builtins = append(l.builtins, b)
			l.byTool.note(BuiltinToolReturn, b.Tool, b.ToolCallID, Position{idx, p})
		case part.isOutcome():
			last, ok := l.waiting[part.ToolCallID]
			if !ok {
				if _, done := l.answered[part.ToolCallID]; !done {
					l.unpair(part, idx, p)
				}
				continue
			}
			if l.answered == nil {
				l.answered = map[string]struct{}{}
			}
			l.answered[part.ToolCallID] = struct{}{}
			o := CallReturned
			if part.Kind == RetryPrompt {
				o = CallRetried
			}
			for i := last; i > 0; i = l.prev[i-1] {
				c := &l.calls[i-1]
				c.Outcome = o
				l.byTool.note(ToolReturn, c.Tool, c.ToolCallID, Position{c.Message, c.Part})
			}
			delete(l.waiting, part.ToolCallID)
		case part.Kind == ToolReturn || part.Kind == RetryPrompt:
			// Without a tool_call_id: it answers no call.
			l.unpair(part, idx, p)
		}
	}
}

// unpair records a return that answers no call (UnpairedReturn); a retry
// prompt that names no tool is the framework's own words, not recorded.
func (l *callLog) unpair(part *Part, idx, p int) {
	if part.Kind == RetryPrompt && part.ToolName == "" {
		return
	}
	u := UnpairedReturn{Tool: part.ToolName, Message: idx, Part: p}
	if part.HasToolCallID {
		id := part.ToolCallID
		u.ToolCallID = &id
	}
	l.unpaired = append(l.unpaired, u)
	l.byTool.noteUnpaired(u.Tool, u.ToolCallID, Position{idx, p})
}

// unpairedSnapshot returns a copy of the unpaired returns so far, never
// nil.
func (l *callLog) unpairedSnapshot() []UnpairedReturn {
	out := make([]UnpairedReturn, len(l.unpaired))
	copy(out, l.unpaired)
	return out
}

// builtinSnapshot returns a copy of the provider-side returns so far,
// never nil.
func (l *callLog) builtinSnapshot() []BuiltinReturn {
	out := make([]BuiltinReturn, len(l.builtins))
	copy(out, l.builtins)
	return out
}

// snapshot returns a copy of the calls so far, never nil.
func (l *callLog) snapshot() []ToolCallRecord {
	out := make([]ToolCallRecord, len(l.calls))
	copy(out, l.calls)
	return out
}

// returnsByTool is Facts.ReturnsByTool of h derived on its own, for a
// derivation that does not list the calls (Options.ToolCalls off): the
// pairing of callLog.fold without its records, each call kept only as
// what the summary notes (its tool and place) while it waits for an
// outcome. It agrees with callLog's summary on every history
// (TestReturnsByToolAlone, FuzzDerive).
func returnsByTool(h History) []ToolReturns {
	type pending struct {
		tool          string
		id            string
		message, part int
		prev          int // the earlier call waiting with the same id (index + 1), 0 for none
	}
	n := 0
	for m := range h {
		for p := range h[m].Parts {
			if part := &h[m].Parts[p]; part.Kind == ToolCall && part.HasToolCallID {
				n++
			}
		}
	}
	calls := make([]pending, 0, n)
	// state maps a tool_call_id to the latest call with it that no
	// outcome has followed (index + 1), or to 0 once an outcome answered
	// the calls with it: fold's waiting and answered in one map.
	state := make(map[string]int, n)
	var s returnSummary
	for m := range h {
		for p := range h[m].Parts {
			part := &h[m].Parts[p]
			switch {
			case part.Kind == ToolCall:
				if part.HasToolCallID {
					calls = append(calls, pending{tool: part.ToolName, id: part.ToolCallID, message: m, part: p, prev: state[part.ToolCallID]})
					state[part.ToolCallID] = len(calls)
				}
			case part.Kind == BuiltinToolReturn && part.ToolKind == ToolKindNone:
				s.note(BuiltinToolReturn, part.ToolName, idOf(part), Position{m, p})
			case part.isOutcome():
				last, seen := state[part.ToolCallID]
				if !seen {
					if part.Kind != RetryPrompt || part.ToolName != "" {
						s.noteUnpaired(part.ToolName, &part.ToolCallID, Position{m, p})
					}
					continue
				}
				for i := last; i > 0; i = calls[i-1].prev {
					c := &calls[i-1]
					s.note(ToolReturn, c.tool, &c.id, Position{c.message, c.part})
				}
				state[part.ToolCallID] = 0
			case part.Kind == ToolReturn || part.Kind == RetryPrompt:
				if part.Kind != RetryPrompt || part.ToolName != "" {
					s.noteUnpaired(part.ToolName, nil, Position{m, p})
				}
			}
		}
	}
	out := s.snapshot(nil)
	// The ids pointed into calls and h: the summary gets its own.
	ids := make([]string, len(out))
	for i := range out {
		if out[i].ToolCallID != nil {
			ids[i] = *out[i].ToolCallID
			out[i].ToolCallID = &ids[i]
		}
	}
	return out
}

// idOf is a pointer to part's tool_call_id, nil when it has none.
func idOf(part *Part) *string {
	if !part.HasToolCallID {
		return nil
	}
	return &part.ToolCallID
}
