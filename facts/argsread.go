package facts

import (
	"fmt"

	"github.com/policycheck/policycheck/facts/internal/jsonvalue"
)

// Bounds of what ReadArgs reads exactly. Beyond them a call's arguments
// are refused (the engine's invalid_args), never passed on as something
// else: OPA refuses numbers whose binary exponent passes 100,000 and the
// schema validator cannot compare a number whose decimal exponent passes
// a million, so a number either reader could not take would otherwise
// reach the rules as null, or crash the validator.
const (
	// MaxArgsNumberDigits is the most digits a number in a call's
	// arguments may spell (its integer and fraction digits together).
	MaxArgsNumberDigits = jsonvalue.MaxNumberDigits
	// MaxArgsNumberExponent bounds the exponent a number in a call's
	// arguments may spell: from -MaxArgsNumberExponent to
	// MaxArgsNumberExponent (1e400 is read, 1e401 is not).
	MaxArgsNumberExponent = jsonvalue.MaxNumberExponent
	// MaxArgsDepth is the most arrays and objects a value of string
	// arguments may lie inside, as the reference's JSON parser counts
	// them (it refuses deeper ones); object arguments are bounded by the
	// history's own limit.
	MaxArgsDepth = jsonvalue.MaxDepth
)

// Args is a call's arguments read once: what the policies read and what a
// schema validates both come from this one reading, so that no reader
// (the rules, the schema, an approval's or a receipt's digest, the tool
// service) can read the same bytes as other arguments.
type Args struct {
	// Value is the arguments as the policies read them
	// (input.call.args): the JSON value, numbers as encoding/json's
	// json.Number, with a
	// string that holds a JSON object read as that object; nil for null
	// or absent arguments, and when Problem is set.
	Value any
	// Problem is why the arguments cannot be read exactly one way: a key
	// given twice in one object, string arguments with data after their
	// JSON, a number beyond MaxArgsNumberDigits or
	// MaxArgsNumberExponent, nesting past MaxArgsDepth, or bytes that
	// are not JSON. Nil when they read.
	Problem *ArgsProblem

	// validated is what a schema validates (pydantic-ai's reading: a
	// string is parsed as JSON, an empty one and null are {}); notJSON
	// says why a string that holds no JSON fails any schema.
	validated any
	notJSON   string
}

// ReadArgs reads a call's raw arguments (the history's JSON: an object, a
// string holding JSON, or null) strictly, with the one JSON scanner
// (internal/ground/wire): RFC 8259 and UTF-8 only, no key twice in an object at
// any depth, nothing after the value, numbers within the bounds above.
// String arguments are read the same way: a string that begins with a
// JSON value must hold exactly that value, read as strictly (a lone UTF-16
// surrogate escape, which encoding/json would read as U+FFFD, is refused
// too); a string that holds no JSON value stays a string for the rules
// (and fails any schema).
func ReadArgs(raw []byte) Args {
	r := jsonvalue.ReadArgs(raw)
	return Args{Value: r.Value, Problem: problemOf(r.Problem), validated: r.Validated, notJSON: r.NotJSON}
}

// problemOf is the reading problem p as an ArgsProblem; nil for none.
func problemOf(p *jsonvalue.Problem) *ArgsProblem {
	if p == nil {
		return nil
	}
	return &ArgsProblem{Pointer: p.Pointer, Reason: p.Reason}
}

// String is a short account of why arguments cannot be read, for error
// messages: "POINTER: REASON", "(root)" for the arguments themselves.
func (p ArgsProblem) String() string {
	ptr := p.Pointer
	if ptr == "" {
		ptr = "(root)"
	}
	return fmt.Sprintf("%s: %s", ptr, p.Reason)
}
