// Package jsonvalue reads JSON bytes into the values package facts
// reasons about, so that facts itself reads no JSON: a call's arguments
// read strictly once (numbers as encoding/json's json.Number, which the
// policy input and the call digest take as numbers), and the flow index's
// walk of a return's content (the leaves a value holds, read from its
// bytes with the wire scanner, encoding/json for what the scanner
// refuses), the flow filter's reading of a content's escapes
// (AppendUnescaped), and what a call's arguments hold as a later return
// may repeat it (Echo, EchoWant: Flow.EchoOfTheAgent). Only facts
// imports it.
package jsonvalue

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// Bounds of what ReadArgs reads exactly (facts.MaxArgsNumberDigits,
// facts.MaxArgsNumberExponent and facts.MaxArgsDepth document them).
const (
	MaxNumberDigits   = 400
	MaxNumberExponent = 400
	MaxDepth          = 200
)

// MaxReason bounds a problem's pointer and reason (Clip).
const MaxReason = 160

// Problem is why a value cannot be read exactly one way: the JSON pointer
// of the offending value ("" for the whole) and what is wrong, each
// clipped (Clip).
type Problem struct {
	Pointer, Reason string
}

// Read is a call's arguments read once (facts.Args).
type Read struct {
	// Value is what the policies read; nil for null, absent or
	// unreadable arguments.
	Value any
	// Problem is why the arguments cannot be read; nil when they read.
	Problem *Problem
	// Validated is what a schema validates (a string is parsed as JSON,
	// an empty one and null are {}).
	Validated any
	// NotJSON, clipped, says why a string that holds no JSON fails any
	// schema; "" otherwise.
	NotJSON string
}

// ReadArgs reads a call's raw arguments as facts.ReadArgs documents.
func ReadArgs(raw []byte) Read {
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Read{Validated: map[string]any{}}
	}
	v, err := decode(raw, MaxDepth)
	if err != nil {
		return Read{Problem: problemOf(err)}
	}
	s, isStr := v.(string)
	if !isStr {
		return Read{Value: v, Validated: v}
	}
	inner := trimSpace([]byte(s))
	if len(inner) == 0 {
		return Read{Value: s, Validated: map[string]any{}}
	}
	iv, err := decode(inner, MaxDepth)
	switch {
	case err == nil:
	case err.Kind == wire.KindSyntax && !err.complete && !strings.Contains(err.Msg, "lone UTF-16 surrogate"):
		// No JSON value: the string is the arguments (and fails any
		// schema). A lone surrogate escape is refused instead: a lax
		// reader (encoding/json) reads it as U+FFFD and the string as
		// JSON, so the rules and a tool service would read two things.
		return Read{Value: s, NotJSON: Clip("the arguments are not valid JSON: " + strings.TrimPrefix(err.Msg, "invalid JSON: "))}
	default:
		return Read{Problem: problemOf(err)}
	}
	if _, isObj := iv.(map[string]any); isObj {
		return Read{Value: iv, Validated: iv}
	}
	return Read{Value: s, Validated: iv}
}

// Decode reads one JSON value, with space around it, as ReadArgs reads
// arguments that are not a string (facts.Registry.ValidateContext's
// reading of a context).
func Decode(raw []byte) (any, *Problem) {
	v, err := decode(trimSpace(raw), MaxDepth)
	if err != nil {
		return nil, problemOf(err)
	}
	return v, nil
}

// readError is a reading error; complete says a whole JSON value was read
// before it (data after it, or a key twice, not a broken value).
type readError struct {
	*wire.Error
	complete bool
}

func problemOf(err *readError) *Problem {
	if err.Kind == wire.KindSyntax && !err.complete {
		// As the schema check has always said it, at the root.
		return &Problem{Reason: Clip("the arguments are not valid JSON: " + strings.TrimPrefix(err.Msg, "invalid JSON: "))}
	}
	return &Problem{Pointer: Clip(err.Pointer), Reason: Clip(err.Msg)}
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

// decode decodes one JSON value that must fill data.
func decode(data []byte, maxDepth int) (any, *readError) {
	d := decoder{Scanner: wire.Scanner{Data: data, MaxDepth: maxDepth, Strict: true}}
	v, err := d.value()
	if err != nil {
		return nil, &readError{Error: err, complete: err.Kind == wire.KindSchema}
	}
	if d.WS(); d.I < len(d.Data) { // not Peek: it reads a NUL byte as the end
		e := d.Syntax("the arguments hold one JSON value followed by other data (at byte %d): send exactly one JSON object", d.I)
		return nil, &readError{Error: e, complete: true}
	}
	return v, nil
}

type decoder struct{ wire.Scanner }

// value decodes the value at the scanner: objects as map[string]any
// (refusing a key given twice), arrays as []any, numbers as json.Number
// (refusing one out of bounds).
func (d *decoder) value() (any, *wire.Error) {
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
				clipText(n), MaxNumberDigits, MaxNumberExponent, MaxNumberExponent)
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
// MaxNumberDigits digits and an exponent within ±MaxNumberExponent.
func numberInBounds(n string) bool {
	digits, i := 0, 0
	for ; i < len(n) && n[i] != 'e' && n[i] != 'E'; i++ {
		if '0' <= n[i] && n[i] <= '9' {
			digits++
		}
	}
	if digits > MaxNumberDigits {
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
	return err == nil && e <= MaxNumberExponent
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

// Clip bounds a problem's pointer or reason to MaxReason bytes, cut at a
// rune's start, "..." marking the cut.
func Clip(s string) string {
	if len(s) <= MaxReason {
		return s
	}
	cut := MaxReason - 3
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Echo is what the raw arguments of a call hold, as a return that
// answers the call may repeat it: their strings, object keys and
// numbers' texts, each in EchoForm, and the keys of their non-trivial
// numbers (numberKey).
type Echo struct {
	texts []string
	nums  []string
	size  int
}

// EchoOf reads the raw arguments args (as ReadArgs reads them).
func EchoOf(args []byte) *Echo {
	e := &Echo{}
	var walk func(a any)
	walk = func(a any) {
		switch x := a.(type) {
		case map[string]any:
			for k, v := range x {
				e.text(k)
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		case string:
			e.text(x)
		case json.Number:
			e.text(x.String())
			if k, ok := numberKey(x); ok {
				e.nums = append(e.nums, k)
			}
		}
	}
	walk(ReadArgs(args).Value)
	return e
}

// text keeps s in EchoForm, unless it folds to nothing: no value looked
// up is inside an empty text (echoIn), and the budget, which counts a
// text's bytes, would not count comparing with it.
func (e *Echo) text(s string) {
	f := EchoForm(s)
	if f == "" {
		return
	}
	e.texts = append(e.texts, f)
	e.size += len(f)
}

// Size is the bytes a look-up may compare: those of the texts.
func (e *Echo) Size() int { return e.size }

// Texts are the texts, each in EchoForm and none empty, in the order of
// the arguments (HasText looks for a text inside one of them).
func (e *Echo) Texts() []string { return e.texts }

// Numbers are the keys of the non-trivial numbers (HasNumber compares a
// key with them).
func (e *Echo) Numbers() []string { return e.nums }

// EchoWant is a value as a look-up compares it with an Echo, folded
// once: a string in EchoForm, or a number's key and its plain decimal
// in EchoForm ("12345.67" is "1234567"; empty when the key is not a
// number).
type EchoWant struct {
	text, key string
	num       bool
}

// WantText is the string s as a look-up compares it.
func WantText(s string) EchoWant { return EchoWant{text: EchoForm(s)} }

// WantNumber is the number whose key is key (numberKey) as a look-up
// compares it.
func WantNumber(key string) EchoWant {
	w := EchoWant{key: key, num: true}
	if f, err := strconv.ParseFloat(key, 64); err == nil {
		w.text = EchoForm(strconv.FormatFloat(f, 'f', -1, 64))
	}
	return w
}

// WantValue is the value v of a call's arguments, as ArgsValue reads
// it, as a look-up compares it: a string (WantText), a non-trivial
// number by its key (WantNumber), a trivial number by its text (as
// EchoesNumber looks for one); false for any other value, which no
// look-up finds.
func WantValue(v any) (EchoWant, bool) {
	switch x := v.(type) {
	case string:
		return WantText(x), true
	case json.Number:
		if k, ok := numberKey(x); ok {
			return WantNumber(k), true
		}
		return WantText(x.String()), true
	}
	return EchoWant{}, false
}

// Text is the folded text a look-up finds inside a text.
func (w EchoWant) Text() string { return w.text }

// Key is the number's key, and whether w is a number.
func (w EchoWant) Key() (string, bool) { return w.key, w.num }

// Has reports whether the echo holds w: a number among the numbers (of
// equal value, however written: 73401659, 7.3401659e7), or w's text
// inside one of the texts (a number written as a plain decimal:
// "account 73401659"); an empty text is in none.
func (e *Echo) Has(w EchoWant) bool {
	if w.num {
		for _, k := range e.nums {
			if k == w.key {
				return true
			}
		}
	}
	return echoIn(e.texts, w.text)
}

// HasText reports whether the string want is inside one of the texts
// (Has).
func (e *Echo) HasText(want string) bool { return e.Has(WantText(want)) }

// HasNumber reports whether the number whose key is key is held (Has).
func (e *Echo) HasNumber(key string) bool { return e.Has(WantNumber(key)) }

// Echoes reports whether the text want (a string value) is in the raw
// arguments args (EchoOf, Echo.HasText).
func Echoes(args []byte, want string) bool { return EchoOf(args).HasText(want) }

// EchoesNumber reports whether the number whose JSON text is n is in
// the raw arguments args (EchoOf, Echo.HasNumber); a trivial number
// (numberKey) by its text alone.
func EchoesNumber(args []byte, n string) bool {
	k, ok := numberKey(json.Number(n))
	if !ok {
		return Echoes(args, n)
	}
	return EchoOf(args).HasNumber(k)
}

// echoIn reports whether want (in EchoForm) is inside one of texts; an
// empty want is in none.
func echoIn(texts []string, want string) bool {
	if want == "" {
		return false
	}
	for _, t := range texts {
		if strings.Contains(t, want) {
			return true
		}
	}
	return false
}

// EchoForm is s with its letters and digits only, lower-cased, the
// fullwidth forms of ASCII letters and digits read as those: white
// space, punctuation, separators and invisible format characters (a
// soft hyphen, a zero-width space) dropped, so that an IBAN sent as
// "GB33-BUKB-2020...", "gb33.bukb.2020..." or in fullwidth letters and
// returned as "GB33BUKB2020..." is the one sent.
func EchoForm(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			b.WriteRune(r)
		case 'A' <= r && r <= 'Z':
			b.WriteRune(r + 'a' - 'A')
		case 0xFF10 <= r && r <= 0xFF19 || 0xFF41 <= r && r <= 0xFF5A:
			b.WriteRune(r - 0xFEE0) // a fullwidth digit or small letter
		case 0xFF21 <= r && r <= 0xFF3A:
			b.WriteRune(r - 0xFEE0 + 'a' - 'A') // a fullwidth capital
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
