package facts

// Evidence kinds a Reveal can come from (spec D1).
const (
	RevealSearchReturn = "search return"
	RevealNativeSearch = "provider-side search return"
	RevealLegacy       = "legacy search metadata"
	RevealDelta        = "tool-availability delta"
)

// Reveal is one piece of reveal evidence for a tool name.
type Reveal struct {
	At   Position
	Kind string
}

// Load is one complete typed load pair for a capability.
type Load struct {
	Call, Return Position
}

// Trace is where the evidence of a history sits, for explanations: every
// reveal of every name and every complete load pair, whether or not it lies
// inside a window, plus every compaction part.
type Trace struct {
	Reveals     map[string][]Reveal
	Loads       map[string][]Load
	Compactions []Position
}

// TraceHistory records the evidence of h in order.
func TraceHistory(h History) Trace {
	t := Trace{Reveals: map[string][]Reveal{}, Loads: map[string][]Load{}}
	calls := map[string]struct {
		id  string
		pos Position
	}{}
	walk(h, Position{}, func(m, p int, part *Part) {
		pos := Position{m, p}
		if part.Kind == Compaction {
			t.Compactions = append(t.Compactions, pos)
		}
		kind := ""
		switch {
		case part.Kind == ToolAvailabilityDelta:
			kind = RevealDelta
		case part.Kind == BuiltinToolReturn:
			kind = RevealNativeSearch
		case part.Kind == ToolReturn && part.ToolKind == ToolKindSearch:
			kind = RevealSearchReturn
		case part.Kind == ToolReturn:
			kind = RevealLegacy
		}
		for _, n := range part.Reveals {
			t.Reveals[n] = append(t.Reveals[n], Reveal{At: pos, Kind: kind})
		}
		if part.ToolKind != ToolKindLoad || !part.HasToolCallID {
			return
		}
		switch part.Kind {
		case ToolCall:
			if part.HasLoadID {
				calls[part.ToolCallID] = struct {
					id  string
					pos Position
				}{part.LoadID, pos}
			}
		case ToolReturn:
			if c, ok := calls[part.ToolCallID]; ok {
				t.Loads[c.id] = append(t.Loads[c.id], Load{Call: c.pos, Return: pos})
			}
		}
	})
	return t
}

// Before reports whether p comes before q in the history.
func (p Position) Before(q Position) bool {
	return p.Message < q.Message || (p.Message == q.Message && p.Part < q.Part)
}
