package facts

import "fmt"

// MessageKind is the "kind" discriminator of a message.
type MessageKind uint8

// Message kinds.
const (
	Request MessageKind = iota + 1
	Response
)

func (k MessageKind) String() string {
	switch k {
	case Request:
		return "request"
	case Response:
		return "response"
	}
	return fmt.Sprintf("MessageKind(%d)", uint8(k))
}

// PartKind is the "part_kind" discriminator of a part.
type PartKind uint8

// Part kinds (spec W7). Only tool calls and returns, retry prompts,
// availability deltas, compactions and the builtin (provider-side) tool
// parts can carry evidence; the others are kept for positions only.
const (
	SystemPrompt PartKind = iota + 1
	UserPrompt
	Speech
	File
	Text
	Thinking
	ToolCall
	ToolReturn
	RetryPrompt
	ToolAvailabilityDelta
	Compaction
	BuiltinToolCall
	BuiltinToolReturn
)

var partKindNames = [...]string{
	SystemPrompt:          "system-prompt",
	UserPrompt:            "user-prompt",
	Speech:                "speech",
	File:                  "file",
	Text:                  "text",
	Thinking:              "thinking",
	ToolCall:              "tool-call",
	ToolReturn:            "tool-return",
	RetryPrompt:           "retry-prompt",
	ToolAvailabilityDelta: "tool-availability-delta",
	Compaction:            "compaction",
	BuiltinToolCall:       "builtin-tool-call",
	BuiltinToolReturn:     "builtin-tool-return",
}

// String returns the wire name of the part kind.
func (k PartKind) String() string {
	if int(k) < len(partKindNames) && partKindNames[k] != "" {
		return partKindNames[k]
	}
	return fmt.Sprintf("PartKind(%d)", uint8(k))
}

// ParsePartKind maps a wire name to its PartKind.
func ParsePartKind(s string) (PartKind, bool) {
	for k, name := range partKindNames {
		if name != "" && name == s {
			return PartKind(k), true
		}
	}
	return 0, false
}

// AllowedIn reports whether a part of this kind may appear in a message of
// kind mk (spec W7).
func (k PartKind) AllowedIn(mk MessageKind) bool {
	switch k {
	case SystemPrompt, UserPrompt, ToolReturn, RetryPrompt, ToolAvailabilityDelta:
		return mk == Request
	case Speech:
		return true
	case Text, Thinking, Compaction, File, ToolCall, BuiltinToolCall, BuiltinToolReturn:
		return mk == Response
	}
	return false
}

// ToolKind is the "tool_kind" discriminator that types framework parts
// (spec W14). It is a closed enum.
type ToolKind uint8

// Tool kinds.
const (
	ToolKindNone   ToolKind = iota // null: an ordinary part
	ToolKindSearch                 // "tool-search"
	ToolKindLoad                   // "capability-load"
)

// String returns the wire value ("" for none).
func (k ToolKind) String() string {
	switch k {
	case ToolKindSearch:
		return "tool-search"
	case ToolKindLoad:
		return "capability-load"
	}
	return ""
}

// Outcome is a tool return's "outcome".
type Outcome uint8

// Outcomes of a tool return (spec W9); success is the default.
const (
	OutcomeSuccess Outcome = iota
	OutcomeFailed
	OutcomeDenied
	OutcomeInterrupted
)

// Part is one decoded part, reduced to what availability depends on.
//
// The decoder fills Reveals and LoadID from the typed payloads so that
// derivation never re-reads JSON: a Part is evidence-ready.
type Part struct {
	Kind     PartKind
	ToolKind ToolKind
	// ToolName of a tool call or return (empty for other parts).
	ToolName string
	// ToolCallID and HasToolCallID: an absent id never pairs with anything
	// (the reference fills in a random one).
	ToolCallID    string
	HasToolCallID bool
	// Reveals holds the names this part reveals (spec D1): a typed search
	// return's or a native search return's discovered_tools names, a
	// legacy search return's metadata list, or a delta's tools_added.
	// Nil for every other part.
	Reveals []string
	// LoadID is the capability id a typed load call names (spec L2);
	// HasLoadID is false when the call names none.
	LoadID    string
	HasLoadID bool
	// Outcome of a tool return.
	Outcome Outcome
	// Provider is the part's provider_name (compaction parts use it for the
	// wire-boundary predicate, spec C4); HasProvider is false for null.
	Provider    string
	HasProvider bool
	// HasPayload is true for a compaction part that carries a payload:
	// provider_details has the key encrypted_content, or content is not
	// null (spec C4).
	HasPayload bool
	// Args is the raw JSON of a tool call's args (object, string or null),
	// handed to operator rules. It may alias the decoder's input buffer.
	Args []byte
	// Content is the raw JSON of a tool-return's or builtin-tool-return's
	// content (any JSON value), read for flows. It may alias the
	// decoder's input buffer.
	Content []byte
	// Receipt is the raw JSON of a tool return's
	// metadata.policycheck_receipt (where a harness keeps the execution
	// receipt of the call the return answers), nil when absent. Only
	// verified evidence reads it (engine). It may alias the decoder's
	// input buffer.
	Receipt []byte
}

// Message is one decoded message.
type Message struct {
	Kind MessageKind
	// Provider is a response's provider_name (the serving provider that
	// anchors the dispatch window, spec C6); HasProvider is false for null.
	Provider    string
	HasProvider bool
	// Timestamp is the raw JSON of the message's timestamp (a string or
	// a number, as the history wrote it), nil when it is null or absent.
	// It may alias the decoder's input buffer.
	Timestamp []byte
	Parts     []Part
}

// History is a decoded message history, oldest message first.
type History []Message

// Position addresses a part: the index of a message in the history and of
// a part in that message.
type Position struct {
	Message int `json:"message"`
	Part    int `json:"part"`
}

// isOutcome reports whether a part is the outcome of a tool call with an
// id: a tool-return or a retry-prompt carrying a tool_call_id.
func (p *Part) isOutcome() bool {
	return (p.Kind == ToolReturn || p.Kind == RetryPrompt) && p.HasToolCallID
}

// isBoundaryFor reports whether a compaction part is a wire boundary for
// provider p (spec C4, history-only reading).
func (p *Part) isBoundaryFor(provider string) bool {
	return p.Kind == Compaction && p.HasProvider && p.Provider == provider && p.HasPayload
}
