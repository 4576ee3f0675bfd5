package facts

import "fmt"

// Verified evidence. By default every reveal and every load of a history
// counts as the client wrote it. A Voucher lets the caller (package
// engine, with what the server knows: the calls it judged, the receipts
// it signed) say which evidence it vouches for; evidence it does not is
// removed before anything is derived, as if the history never held it,
// and reported (Facts.Unvouched). This package decides only what is
// structural — which part is evidence and which call produced it — and
// never what a receipt proves.

// Claim is one piece of evidence a Voucher is asked about: a tool return
// that reveals tool names (a search return, typed or legacy) or that
// completes a capability load, with the call that produced it.
type Claim struct {
	// At is the position of the tool-return part; Part is that part.
	At   Position
	Part *Part
	// Call is the tool-call part the return answers, at CallAt: for a
	// reveal, the latest tool-call part with the return's tool_call_id
	// before it, which is a search call; for a load, the latest typed
	// load call with that id that names a capability (the call whose
	// capability the return loads).
	Call   *Part
	CallAt Position
	// Load is true when the claim is a capability load, false for a
	// reveal.
	Load bool
}

// Voucher says whether a claim's evidence counts: "" when the caller
// vouches for the call that produced it, else why not (a sentence for
// people). It is called once per claim, in history order, by both Derive
// and the Tracker (each given VouchedBy): a Voucher that answers the same
// claim the same way makes them agree.
type Voucher interface {
	Vouch(c Claim) string
}

// VoucherFunc adapts a function to a Voucher.
type VoucherFunc func(c Claim) string

// Vouch calls f.
func (f VoucherFunc) Vouch(c Claim) string { return f(c) }

// Unvouched is a piece of evidence that does not count: the part at At
// carried it, and Why says why it was not vouched for.
type Unvouched struct {
	At  Position
	Why string
}

// vouching walks a history in order, finding the call each piece of
// evidence answers and asking the Voucher about it.
type vouching struct {
	v     Voucher
	calls map[string]callRef // latest tool-call part per tool_call_id
	loads map[string]callRef // latest typed load call naming a capability, per id
	out   []Unvouched
}

type callRef struct {
	at   Position
	part *Part
}

func newVouching(v Voucher) *vouching {
	return &vouching{v: v, calls: map[string]callRef{}, loads: map[string]callRef{}}
}

// message returns m with the evidence not vouched for removed (m itself
// when all of it is, else a copy whose changed parts are copies: the
// caller's message is never written), recording why in s.out. idx is m's
// index in the history.
func (s *vouching) message(m *Message, idx int) *Message {
	var parts []Part // the copy, made at the first part that changes
	for p := range m.Parts {
		part := &m.Parts[p]
		at := Position{idx, p}
		why, load := s.part(part, at)
		if why == "" {
			continue
		}
		s.out = append(s.out, Unvouched{At: at, Why: why})
		if parts == nil {
			parts = append([]Part(nil), m.Parts...)
		}
		if load {
			// The return no longer completes the load pair.
			parts[p].ToolKind = ToolKindNone
		} else {
			parts[p].Reveals = nil
		}
	}
	if parts == nil {
		return m
	}
	c := *m
	c.Parts = parts
	return &c
}

// part records a call, or judges a part's evidence: why is "" when the
// part carries none or it is vouched for; load says which kind it was.
func (s *vouching) part(part *Part, at Position) (why string, load bool) {
	switch part.Kind {
	case ToolCall:
		if part.HasToolCallID {
			s.calls[part.ToolCallID] = callRef{at, part}
			if part.ToolKind == ToolKindLoad && part.HasLoadID {
				s.loads[part.ToolCallID] = callRef{at, part}
			}
		}
		if len(part.Reveals) > 0 {
			return "a tool call carries it: no call produced it", false
		}
		return "", false
	case ToolAvailabilityDelta:
		if len(part.Reveals) > 0 {
			return "a tool-availability delta: the client wrote it, no call this server judged produced it", false
		}
		return "", false
	case BuiltinToolReturn:
		if len(part.Reveals) > 0 {
			return "a provider-side search return: the provider ran the search, not a call this server judged", false
		}
		return "", false
	case ToolReturn:
	default:
		if len(part.Reveals) > 0 {
			return fmt.Sprintf("a %s part carries it: no call produced it", part.Kind), false
		}
		return "", false
	}
	if part.ToolKind == ToolKindLoad && part.HasToolCallID {
		if c, ok := s.loads[part.ToolCallID]; ok {
			return s.v.Vouch(Claim{At: at, Part: part, Call: c.part, CallAt: c.at, Load: true}), true
		}
	}
	if len(part.Reveals) == 0 {
		return "", false
	}
	if !part.HasToolCallID {
		return "the search return has no tool_call_id: no call produced it", false
	}
	c, ok := s.calls[part.ToolCallID]
	switch {
	case !ok:
		return fmt.Sprintf("no tool call with tool_call_id %q precedes the search return", part.ToolCallID), false
	case c.part.ToolKind != ToolKindSearch && c.part.ToolName != SearchTool:
		return fmt.Sprintf("the call with tool_call_id %q it answers is to %q, not a search", part.ToolCallID, c.part.ToolName), false
	}
	return s.v.Vouch(Claim{At: at, Part: part, Call: c.part, CallAt: c.at}), false
}

// VouchHistory returns h without the evidence v does not vouch for (h
// itself when v vouches for all of it; otherwise a new History sharing
// every unchanged message, h unwritten), and that evidence, in history
// order. A search return's reveals and a load return's load are each
// kept only when v vouches for the call that produced them; a
// tool-availability delta and a provider-side search return are never
// kept: no call the caller could have judged produced them.
func VouchHistory(h History, v Voucher) (History, []Unvouched) {
	s := newVouching(v)
	var out History
	for i := range h {
		m := s.message(&h[i], i)
		if m != &h[i] && out == nil {
			out = make(History, len(h))
			copy(out, h)
		}
		if out != nil {
			out[i] = *m
		}
	}
	if out == nil {
		out = h
	}
	return out, nonNilUnvouched(s.out)
}

func nonNilUnvouched(u []Unvouched) []Unvouched {
	if u == nil {
		return []Unvouched{}
	}
	return u
}
