package facts

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/internal/ground/wire"
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
	MaxArgsNumberDigits = 400
	// MaxArgsNumberExponent bounds the exponent a number in a call's
	// arguments may spell: from -MaxArgsNumberExponent to
	// MaxArgsNumberExponent (1e400 is read, 1e401 is not).
	MaxArgsNumberExponent = 400
	// MaxArgsDepth is the most arrays and objects a value of string
	// arguments may lie inside, as the reference's JSON parser counts
	// them (it refuses deeper ones); object arguments are bounded by the
	// history's own limit.
	MaxArgsDepth = 200
)

// Args is a call's arguments read once: what the policies read and what a
// schema validates both come from this one reading, so that no reader
// (the rules, the schema, an approval's or a receipt's digest, the tool
// service) can read the same bytes as other arguments.
type Args struct {
	// Value is the arguments as the policies read them
	// (input.call.args): the JSON value, numbers as json.Number, with a
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
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Args{validated: map[string]any{}}
	}
	v, err := decodeArgs(raw, MaxArgsDepth)
	if err != nil {
		return Args{Problem: problemOf(err)}
	}
	s, isStr := v.(string)
	if !isStr {
		return Args{Value: v, validated: v}
	}
	inner := trimSpace([]byte(s))
	if len(inner) == 0 {
		return Args{Value: s, validated: map[string]any{}}
	}
	iv, err := decodeArgs(inner, MaxArgsDepth)
	switch {
	case err == nil:
	case err.Kind == wire.KindSyntax && !err.complete && !strings.Contains(err.Msg, "lone UTF-16 surrogate"):
		// No JSON value: the string is the arguments (and fails any
		// schema). A lone surrogate escape is refused instead: a lax
		// reader (encoding/json) reads it as U+FFFD and the string as
		// JSON, so the rules and a tool service would read two things.
		return Args{Value: s, notJSON: "the arguments are not valid JSON: " + strings.TrimPrefix(err.Msg, "invalid JSON: ")}
	default:
		return Args{Problem: problemOf(err)}
	}
	if _, isObj := iv.(map[string]any); isObj {
		return Args{Value: iv, validated: iv}
	}
	return Args{Value: s, validated: iv}
}

// argsError is a reading error; complete says a whole JSON value was read
// before it (data after it, or a key twice, not a broken value).
type argsError struct {
	*wire.Error
	complete bool
}

func problemOf(err *argsError) *ArgsProblem {
	if err.Kind == wire.KindSyntax && !err.complete {
		// As the schema check has always said it, at the root.
		return &ArgsProblem{Reason: clip("the arguments are not valid JSON: " + strings.TrimPrefix(err.Msg, "invalid JSON: "))}
	}
	return &ArgsProblem{Pointer: clip(err.Pointer), Reason: clip(err.Msg)}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && wire.IsSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && wire.IsSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// decodeArgs decodes one JSON value that must fill data.
func decodeArgs(data []byte, maxDepth int) (any, *argsError) {
	d := argsDecoder{Scanner: wire.Scanner{Data: data, MaxDepth: maxDepth, Strict: true}}
	v, err := d.value()
	if err != nil {
		return nil, &argsError{Error: err, complete: err.Kind == wire.KindSchema}
	}
	if d.WS(); d.I < len(d.Data) { // not Peek: it reads a NUL byte as the end
		e := d.Syntax("the arguments hold one JSON value followed by other data (at byte %d): send exactly one JSON object", d.I)
		return nil, &argsError{Error: e, complete: true}
	}
	return v, nil
}

type argsDecoder struct{ wire.Scanner }

// value decodes the value at the scanner: objects as map[string]any
// (refusing a key given twice), arrays as []any, numbers as json.Number
// (refusing one out of bounds).
func (d *argsDecoder) value() (any, *wire.Error) {
	switch c := d.Peek(); {
	case c == '{':
		m := map[string]any{}
		err := d.Object(func(key []byte) *wire.Error {
			if _, dup := m[string(key)]; dup {
				return d.Fail(wire.KindSchema, "the key %s appears more than once in this object: send each key once", strconv.Quote(clipText(string(key))))
			}
			v, err := d.value()
			if err != nil {
				return err
			}
			m[string(key)] = v
			return nil
		})
		if err != nil {
			return nil, err
		}
		return m, nil
	case c == '[':
		a := []any{}
		err := d.Array(func(int) *wire.Error {
			v, err := d.value()
			if err != nil {
				return err
			}
			a = append(a, v)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return a, nil
	case c == '"':
		return d.ReadString()
	case c == 't':
		return true, d.Literal("true")
	case c == 'f':
		return false, d.Literal("false")
	case c == 'n':
		return nil, d.Literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		s := d.I
		if err := d.SkipNumber(); err != nil {
			return nil, err
		}
		n := string(d.Data[s:d.I])
		if !numberInBounds(n) {
			return nil, d.Fail(wire.KindSchema, "the number %s is out of range: a number here may spell at most %d digits and an exponent from -%d to %d",
				clipText(n), MaxArgsNumberDigits, MaxArgsNumberExponent, MaxArgsNumberExponent)
		}
		return json.Number(n), nil
	}
	// NaN, Infinity or a byte no value begins with: the scanner's error.
	_, err := d.SkipValue()
	if err == nil {
		err = d.Unexpected()
	}
	return nil, err
}

// numberInBounds reports whether the JSON number n spells at most
// MaxArgsNumberDigits digits and an exponent within
// ±MaxArgsNumberExponent.
func numberInBounds(n string) bool {
	digits, i := 0, 0
	for ; i < len(n) && n[i] != 'e' && n[i] != 'E'; i++ {
		if '0' <= n[i] && n[i] <= '9' {
			digits++
		}
	}
	if digits > MaxArgsNumberDigits {
		return false
	}
	if i == len(n) {
		return true
	}
	exp := strings.TrimLeft(strings.TrimLeft(n[i+1:], "+-"), "0")
	if len(exp) > 6 {
		return false
	}
	if exp == "" { // all zeros
		return true
	}
	e, err := strconv.Atoi(exp)
	return err == nil && e <= MaxArgsNumberExponent
}

// clipText shortens a number or key quoted in a reason.
func clipText(s string) string {
	if len(s) <= 24 {
		return s
	}
	cut := 20
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Validate validates arguments read by ReadArgs against the schema, as
// ValidateArgs does; a reading problem is the one problem.
func (a *ArgsSchema) Validate(args Args) (probs []ArgsProblem, omitted int) {
	switch {
	case args.Problem != nil:
		return []ArgsProblem{*args.Problem}, 0
	case args.notJSON != "":
		return []ArgsProblem{{Reason: clip(args.notJSON)}}, 0
	}
	if !validationSteps(a, args.validated) {
		return []ArgsProblem{{Reason: fmt.Sprintf("validating these arguments against the tool's schema would take more than %d steps: send smaller or less deeply nested arguments",
			MaxArgsValidationSteps)}}, 0
	}
	return a.validate(args.validated)
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
