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

// NearMiss is a part that looks like a search return or a load but
// reveals or loads nothing (spec W18, D2, L1–L3): a framework tool's name
// without the tool_kind that types it, or a typed load part that pairs
// with nothing.
type NearMiss struct {
	At Position
	// Why says what the part is and lacks, as "a `search_tools` return
	// without `tool_kind: tool-search`".
	Why string
	// Load is true for a near miss of a load, false for one of a search.
	Load bool
}

// Trace is where the evidence of a history sits, for explanations: every
// reveal of every name and every complete load pair, whether or not it lies
// inside a window, plus every compaction part and every near miss.
type Trace struct {
	Reveals     map[string][]Reveal
	Loads       map[string][]Load
	Compactions []Position
	NearMisses  []NearMiss
}

// nativeSearchTool is the fixed name of a provider-side search part
// (spec W14).
const nativeSearchTool = "tool_search"

// nearMiss says why part, which reveals nothing by itself, looks like a
// search return or a load that does not count ("" when it does not look
// like one). A load return that answers no typed load call is found by
// the walk, which knows the calls.
func nearMiss(part *Part) (why string, load bool) {
	switch {
	case part.ToolKind == ToolKindNone && part.Kind == ToolReturn && part.ToolName == SearchTool && len(part.Reveals) == 0:
		return "a `search_tools` return without `tool_kind: tool-search`", false
	case part.ToolKind == ToolKindNone && part.Kind == BuiltinToolReturn && part.ToolName == nativeSearchTool:
		return "a `tool_search` builtin-tool-return without `tool_kind: tool-search`", false
	case part.ToolKind == ToolKindNone && part.Kind == ToolCall && part.ToolName == LoadCapabilityTool:
		return "a `load_capability` call without `tool_kind: capability-load`", true
	case part.ToolKind == ToolKindNone && part.Kind == ToolReturn && part.ToolName == LoadCapabilityTool:
		return "a `load_capability` return without `tool_kind: capability-load`", true
	case part.ToolKind == ToolKindLoad && !part.HasToolCallID:
		return "a typed `load_capability` " + callOrReturn(part) + " without a tool_call_id", true
	case part.ToolKind == ToolKindLoad && part.Kind == ToolCall && !part.HasLoadID:
		return "a typed `load_capability` call whose args name no capability id", true
	}
	return "", false
}

func callOrReturn(part *Part) string {
	if part.Kind == ToolCall {
		return "call"
	}
	return "return"
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
		if why, load := nearMiss(part); why != "" {
			t.NearMisses = append(t.NearMisses, NearMiss{At: pos, Why: why, Load: load})
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
			} else {
				t.NearMisses = append(t.NearMisses, NearMiss{At: pos, Load: true,
					Why: "a typed `load_capability` return that answers no earlier typed load call naming a capability"})
			}
		}
	})
	return t
}

// Before reports whether p comes before q in the history.
func (p Position) Before(q Position) bool {
	return p.Message < q.Message || (p.Message == q.Message && p.Part < q.Part)
}
