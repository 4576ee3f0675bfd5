package engine

import (
	"strings"

	"github.com/policycheck/policycheck/internal/printable"
)

// pyRepr renders s as Python's repr() of a str does: the reference quotes
// tool names that way in model-facing messages (spec X4).
func pyRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	printable.Escape(&b, s, rune(quote))
	b.WriteByte(quote)
	return b.String()
}

// UnknownToolMessage is the reference's retry text for a call to a name
// outside the resolved tool set (spec X4). available must be sorted.
func UnknownToolMessage(name string, available []string, resolvedEmpty bool) string {
	var tail string
	switch {
	case len(available) > 0:
		q := make([]string, len(available))
		for i, n := range available {
			q[i] = pyRepr(n)
		}
		tail = "Available tools: " + strings.Join(q, ", ")
	case !resolvedEmpty:
		tail = "No tools are available yet: search for the tools you need."
	default:
		tail = "No tools available."
	}
	return "Unknown tool name: " + pyRepr(name) + ". " + tail
}

// NotAvailableMessage is the reference's retry text for a resolved tool the
// gate refuses (spec X5): the capability form when capability is non-empty,
// else the search form.
func NotAvailableMessage(name, capability string) string {
	if capability != "" {
		return "Tool " + pyRepr(name) + " is not available yet: it belongs to capability " + pyRepr(capability) +
			". Call `load_capability` for it first, then call the tool again once you've read the capability's instructions."
	}
	return "Tool " + pyRepr(name) + " is not available yet: search for it first, then call it again once you've seen its schema."
}

// deniedMessage is the model-facing text of a denial without an operator
// message.
func deniedMessage(name string) string {
	return "Tool " + pyRepr(name) + " may not be called here: the operator's tool policy denies this call."
}

// failClosedMessage is the model-facing text when the policy could not be
// evaluated.
func failClosedMessage(name string) string {
	return "Tool " + pyRepr(name) + " is not available: the tool policy could not be evaluated, so no tool may run."
}
