package jsonvalue

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// The flow index's walk of a return's content (facts' addPart): the leaves
// walkValue visits in the value encoding/json decodes from the
// content, read from the content's bytes with the wire scanner instead,
// in the same order, without building the value.
//
// The two agree by construction on what the wire scanner accepts: a
// value it reads strictly (RFC 8259, UTF-8, no lone surrogate escape,
// no number extension, every value inside at most scanDepth arrays
// and objects) is one encoding/json reads, whose strings unescape the
// same (wire.Unescape) and whose numbers have the same text. What the
// scanner refuses (invalid JSON, and the few things encoding/json reads
// where the scanner does not: invalid UTF-8 and lone surrogates read as
// U+FFFD, nesting between scanDepth and encoding/json's limit, data
// after a top-level value) is read as before, with encoding/json, so
// that the index is the same whatever the content (walk_test.go keeps
// the old walk and compares).

// Of a return's content, the flow index reads JSON encoded inside a
// string this many levels deep.
const NestDepth = 4

// SignificantDigits is the number of significant digits a number needs
// to be matched (numberKey).
const SignificantDigits = 5

// scanDepth is the nesting the scanner reads: every value inside at
// most this many arrays and objects is at most one level deeper than
// encoding/json's limit of 10,000 levels counts (an empty innermost [] or
// {}), within it.
const scanDepth = 9999

// Leaf is one leaf of a content's walk: a string of at least the
// minimum length, or a number's key (num). Its bytes are the content's
// [s:e], or, when text, the walker's text[s:e]. A leaf and a member hold
// no pointer, so that putting an object's members in order moves plain
// memory.
type Leaf struct {
	s, e      int
	text, num bool
	// inexact: a number whose digits are not its key's (floatExact).
	inexact bool
}

// Len is the length of the leaf's bytes.
func (l *Leaf) Len() int { return l.e - l.s }

// Num reports whether the leaf is a number's key (numberKey), not a
// string.
func (l *Leaf) Num() bool { return l.num }

// Inexact reports whether the leaf is a number whose digits are not its
// key's (an integer past 2^53, a decimal of more than 17 digits): equal
// numbers by key may be other numbers digit for digit (floatExact).
func (l *Leaf) Inexact() bool { return l.inexact }

// member is one member of an object being walked: its key, text[ks:ke],
// and the leaves its key and value emitted, leaves[from:to].
type member struct {
	ks, ke, from, to int
}

// Walker walks one return's content at a time into its leaves, reusing
// its scratch from one content to the next. It is not safe for
// concurrent use.
type Walker struct {
	minLen  int
	content []byte
	// text holds what is not in the content: object keys, unescaped
	// strings, number keys. It only grows during a walk, so that a
	// scanner reading an unescaped string in it reads bytes that stay.
	text    []byte
	leaves  []Leaf
	members []member
	tmp     []Leaf
	scan    [NestDepth + 1]wire.Scanner
}

// NewWalker returns a walker whose string leaves are those of at least
// minLen bytes.
func NewWalker(minLen int) *Walker { return &Walker{minLen: minLen} }

// Leaves are the leaves of the content last walked, in walkValue's order;
// they are valid until the next Walk.
func (w *Walker) Leaves() []Leaf { return w.leaves }

// Bytes returns a leaf's bytes, valid until the next Walk.
func (w *Walker) Bytes(l *Leaf) []byte {
	if l.text {
		return w.text[l.s:l.e]
	}
	return w.content[l.s:l.e]
}

// Walk walks a return's content into its leaves (Leaves) and reports
// whether it is JSON (read as json.Decoder reads a stream's first value); when it
// is not, its leaves are none.
func (w *Walker) Walk(data []byte) bool {
	w.content = data
	w.leaves, w.members, w.text = w.leaves[:0], w.members[:0], w.text[:0]
	if w.value(data, 0, len(data), false, 0) {
		return true
	}
	w.leaves, w.members = w.leaves[:0], w.members[:0]
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return false
	}
	walkValue(v, 0, w.minLen, w.emit)
	return true
}

// emit appends a leaf of walkValue.
func (w *Walker) emit(s string, isNum, inexact bool) bool {
	n := len(w.text)
	w.text = append(w.text, s...)
	w.leaves = append(w.leaves, Leaf{s: n, e: len(w.text), text: true, num: isNum, inexact: inexact})
	return true
}

// value walks buf[s:e] (buf the content, or w.text when text), one JSON
// value with only whitespace around it, at nesting depth (of JSON inside
// strings), and reports whether the scanner read it; when it did not,
// the leaves and members it added are dropped.
func (w *Walker) value(buf []byte, s, e int, text bool, depth int) bool {
	leaves, members := len(w.leaves), len(w.members)
	d := &w.scan[depth]
	*d = wire.Scanner{Data: buf[:e], I: s, MaxDepth: scanDepth, Strict: true, Path: d.Path[:0], Names: d.Names[:0]}
	if w.walk(d, text, depth) != nil || wire.SkipSpace(d.Data, d.I) != e {
		w.leaves, w.members = w.leaves[:leaves], w.members[:members]
		return false
	}
	return true
}

// walk reads the value at d (over the content, or w.text when text) and
// emits its leaves in walkValue's order.
func (w *Walker) walk(d *wire.Scanner, text bool, depth int) *wire.Error {
	switch c := d.Peek(); {
	case c == '"':
		s, e, esc, err := d.SkipString()
		if err != nil {
			return err
		}
		if esc {
			u := wire.Unescape(d.Data[s-1 : e+1])
			s = len(w.text)
			w.text = append(w.text, u...)
			e, text = len(w.text), true
		}
		w.str(s, e, text, depth)
	case c == '{':
		from, base := len(w.leaves), len(w.members)
		err := d.Object(func(key []byte) *wire.Error {
			m := member{ks: len(w.text), from: len(w.leaves)}
			w.text = append(w.text, key...)
			m.ke = len(w.text)
			if len(key) >= w.minLen {
				w.leaves = append(w.leaves, Leaf{s: m.ks, e: m.ke, text: true})
			}
			if err := w.walk(d, text, depth); err != nil {
				return err
			}
			m.to = len(w.leaves)
			w.members = append(w.members, m)
			return nil
		})
		if err != nil {
			return err
		}
		w.sortMembers(from, base)
		w.members = w.members[:base]
	case c == '[':
		return d.Array(func(int) *wire.Error { return w.walk(d, text, depth) })
	case c == '-' || ('0' <= c && c <= '9'):
		s := d.I
		if err := d.SkipNumber(); err != nil {
			return err
		}
		n := len(w.text)
		var ok bool
		if w.text, ok = appendNumberKey(w.text, d.Data[s:d.I]); ok {
			w.leaves = append(w.leaves, Leaf{s: n, e: len(w.text), text: true, num: true, inexact: !shortDecimal(d.Data[s:d.I]) && !floatExact(string(d.Data[s:d.I]), string(w.text[n:]))})
		}
	default:
		_, err := d.SkipValue()
		return err
	}
	return nil
}

// str emits the string buf[s:e] (buf the content, or w.text when text)
// and the leaves of the JSON object or array it holds, as walkValue
// does.
func (w *Walker) str(s, e int, text bool, depth int) {
	if e-s >= w.minLen {
		w.leaves = append(w.leaves, Leaf{s: s, e: e, text: text})
	}
	if depth >= NestDepth {
		return
	}
	buf := w.content
	if text {
		buf = w.text
	}
	b := buf[s:e]
	t := bytes.TrimSpace(b)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return
	}
	ts := s + len(b) - len(bytes.TrimLeftFunc(b, unicode.IsSpace))
	if w.value(buf, ts, ts+len(t), text, depth+1) {
		return
	}
	if v, ok := nestedJSON(string(t)); ok {
		walkValue(v, depth+1, w.minLen, w.emit)
	}
}

// sortMembers puts the leaves of the object whose members are
// w.members[base:] (its leaves w.leaves[from:]) in walkValue's
// order: keys sorted, a key given twice read once, with its last value,
// as encoding/json decodes it.
func (w *Walker) sortMembers(from, base int) {
	ms := w.members[base:]
	key := func(m member) []byte { return w.text[m.ks:m.ke] }
	sorted := true
	for i := 1; i < len(ms); i++ {
		if bytes.Compare(key(ms[i-1]), key(ms[i])) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(key(a), key(b)) })
	w.tmp = w.tmp[:0]
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(key(m), key(ms[i+1])) {
			continue // the last of equal keys is kept
		}
		w.tmp = append(w.tmp, w.leaves[m.from:m.to]...)
	}
	w.leaves = append(w.leaves[:from], w.tmp...)
}

// numberKey returns the key of a non-trivial number: its shortest
// decimal form as a float64. A number is non-trivial when that form has
// at least SignificantDigits significant digits: 12345, 4999.99 and
// 0.031415 are; 2024, 10000, 250.5, 0.5 and 1e21 are not. Small and
// round numbers (counts, years, limits, amounts like 500) are in every
// tool's output; a five-digit value is rarely there by chance.
func numberKey(n json.Number) (string, bool) {
	k, ok := appendNumberKey(nil, []byte(n))
	return string(k), ok
}

// appendNumberKey appends to dst the key of the number whose JSON
// text is n (numberKey).
func appendNumberKey(dst, n []byte) ([]byte, bool) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	l := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64) // d.ddde±xx
	mant := dst[l : l+bytes.IndexByte(dst[l:], 'e')]
	digits := 0
	for i := 0; i < len(mant); i++ {
		if mant[i] >= '0' && mant[i] <= '9' {
			digits++
		}
	}
	if digits < SignificantDigits {
		return dst[:l], false
	}
	return dst, true
}

// floatExact reports whether the JSON number text n has the decimal
// value of its key (numberKey), the shortest form of the 64-bit float it
// reads as (12345, 12345.0 and 1.2345e4 do; 1234567890123456789 and
// 12345.000000000000001 do not): two numbers with one key are the same
// number digit for digit only when both are exact.
func floatExact(n, key string) bool {
	a, aok := decimalOf(n)
	b, bok := decimalOf(key)
	if !aok || !bok || a.n != b.n {
		return false
	}
	if a.n == 0 {
		return true // zero, whatever its sign
	}
	if a.neg != b.neg || a.exp != b.exp {
		return false
	}
	for i := range a.n {
		if a.digit(i) != b.digit(i) {
			return false
		}
	}
	return true
}

// shortDecimal reports whether the JSON number text n has at most 15
// characters and no exponent: at most 15 significant digits, within
// 1e-14 and 1e15, and every such decimal is its float's shortest form
// (floatExact, without reading it).
func shortDecimal[T ~string | ~[]byte](n T) bool {
	if len(n) > 15 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] == 'e' || n[i] == 'E' {
			return false
		}
	}
	return true
}

// decimal is a JSON number's value, read in place: its sign, its
// digits before and after the point (whole, frac), the n significant
// ones from the first-th (no leading or trailing zero; none for zero)
// and the place of the first of them (the value is 0.DIGITS × 10^exp).
type decimal struct {
	neg         bool
	whole, frac string
	first, n    int
	exp         int
}

// digit is the i-th significant digit.
func (d *decimal) digit(i int) byte {
	if j := d.first + i; j < len(d.whole) {
		return d.whole[j]
	} else {
		return d.frac[j-len(d.whole)]
	}
}

// decimalOf reads a JSON number's text; false for anything else, or an
// exponent of more than 9 digits.
func decimalOf(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e := s[i+1:]
		if len(strings.TrimLeft(e, "+-")) > 9 {
			return d, false
		}
		x, err := strconv.Atoi(e)
		if err != nil {
			return d, false
		}
		d.exp, s = x, s[:i]
	}
	d.whole, d.frac = s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		d.whole, d.frac = s[:i], s[i+1:]
	}
	if d.whole == "" || !allDigits(d.whole) || !allDigits(d.frac) {
		return d, false
	}
	total := len(d.whole) + len(d.frac)
	for d.first < total && d.digit(0) == '0' {
		d.first++
	}
	d.n = total - d.first
	for d.n > 0 && d.digit(d.n-1) == '0' {
		d.n--
	}
	d.exp += len(d.whole) - d.first
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// walkValue calls fn, in a fixed order, for every string of v of at
// least minLen bytes and for the key of every non-trivial number: depth
// first, an object's keys sorted, each key before its value, a string
// before the strings JSON-encoded in it. It stops when fn returns false.
// The index's walk of a content's bytes (Walker)
// follows it, and calls it for what the wire scanner refuses.
func walkValue(v any, depth, minLen int, fn func(s string, isNum, inexact bool) bool) bool {
	switch v := v.(type) {
	case string:
		if len(v) >= minLen && !fn(v, false, false) {
			return false
		}
		if depth < NestDepth {
			if inner, ok := nestedJSON(v); ok {
				return walkValue(inner, depth+1, minLen, fn)
			}
		}
	case json.Number:
		if k, ok := numberKey(v); ok {
			return fn(k, true, !shortDecimal(v) && !floatExact(string(v), k))
		}
	case []any:
		for _, e := range v {
			if !walkValue(e, depth, minLen, fn) {
				return false
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if len(k) >= minLen && !fn(k, false, false) {
				return false
			}
			if !walkValue(v[k], depth, minLen, fn) {
				return false
			}
		}
	}
	return true
}

// nestedJSON decodes a string that holds a JSON object or array.
func nestedJSON(s string) (any, bool) {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) {
		return nil, false
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// pointerToken escapes a key as a JSON pointer token (RFC 6901).
func pointerToken(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// VisitArgs calls fn for each leaf of a call's arguments as ReadArgs
// reads them (Read.Value), in document order (an object's keys sorted,
// an array's elements in order), with its JSON pointer: each string, and
// the key of each non-trivial number (numberKey), inexact when its
// digits are not the key's (floatExact).
func VisitArgs(v any, fn func(path, leaf string, num, inexact bool)) {
	visitArgs(v, "", fn)
}

func visitArgs(v any, path string, fn func(path, leaf string, num, inexact bool)) {
	switch v := v.(type) {
	case string:
		fn(path, v, false, false)
	case json.Number:
		if k, ok := numberKey(v); ok {
			fn(path, k, true, !shortDecimal(v) && !floatExact(string(v), k))
		}
	case []any:
		for i, e := range v {
			visitArgs(e, path+"/"+strconv.Itoa(i), fn)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			visitArgs(v[k], path+"/"+pointerToken(k), fn)
		}
	}
}
