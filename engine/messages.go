package engine

import (
	"fmt"
	"strings"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/printable"
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

// policyErrorMessage is the model-facing text of a call denied because a
// rule about it raised an error (rule policy_error): most often an
// argument of a type the rule did not expect.
func policyErrorMessage(name string) string {
	return "Tool " + pyRepr(name) + " was not run: a policy rule about this call could not be evaluated with its arguments. " +
		"Check that each argument has the type the tool expects."
}

// InvalidArgsMessage is the model-facing retry text of an invalid_args
// verdict, in the manner of pydantic-ai's validation retry: how many
// problems, each as the JSON pointer inside the arguments and the reason,
// then "Fix the errors and try again.". It names no tool and quotes no
// schema, and its length is bounded (facts.ValidateArgs keeps at most
// facts.MaxArgsProblems problems, each clipped).
func InvalidArgsMessage(probs []facts.ArgsProblem, omitted int) string {
	s := "s"
	if len(probs)+omitted == 1 {
		s = ""
	}
	more := ""
	if omitted > 0 {
		more = fmt.Sprintf("; and %d more", omitted)
	}
	return fmt.Sprintf("%d validation error%s in the arguments: %s%s\n\nFix the errors and try again.",
		len(probs)+omitted, s, argsProblemsText(probs), more)
}

// argsProblemsText lists problems as "POINTER: REASON; …", "(root)" for
// the arguments themselves.
func argsProblemsText(probs []facts.ArgsProblem) string {
	parts := make([]string, len(probs))
	for i, p := range probs {
		ptr := p.Pointer
		if ptr == "" {
			ptr = "(root)"
		}
		parts[i] = ptr + ": " + p.Reason
	}
	return strings.Join(parts, "; ")
}
