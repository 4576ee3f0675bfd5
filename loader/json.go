package loader

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// scanner is a validating JSON reader over a byte slice. It checks the
// JSON grammar (RFC 8259, UTF-8 only) as the reference's parser reads it:
// the number extensions NaN, Infinity and -Infinity are values, a lone
// UTF-16 surrogate escape is an error. It enforces a nesting limit and
// keeps the JSON pointer of the value it is reading, so that every error
// names where it happened.
type scanner struct {
	data     []byte
	i        int
	depth    int
	maxDepth int
	// extended is set once a number extension (NaN, Infinity,
	// -Infinity) has been read.
	extended bool
	// strict refuses the number extensions (see SkipJSON).
	strict bool
	file   string
	path   []seg
	names  []string // keys of segName segments
}

// seg is one step of the JSON pointer: an array index, or a key given by
// name (key) or read from the input (raw, not copied: pushing it must not
// allocate, as every object member is pushed).
type seg struct {
	// idx >= 0 is an array index; segKey is the raw (unescaped) key
	// data[s:e]; segName is the key names[s]. A segment holds no pointer,
	// so pushing one on the hot path costs no GC write barrier.
	idx, s, e int
}

const (
	segKey  = -1
	segName = -2
)

// span is the extent of one JSON value inside scanner.data; e == 0 means absent.
type span struct{ s, e int }

func (sp span) present() bool { return sp.e != 0 }

func (d *scanner) push(key string) {
	d.names = append(d.names, key)
	d.path = append(d.path, seg{idx: segName, s: len(d.names) - 1})
}

// pushKey pushes the key data[s:e], which holds no escape.
func (d *scanner) pushKey(s, e int) { d.path = append(d.path, seg{idx: segKey, s: s, e: e}) }
func (d *scanner) pushIdx(i int)    { d.path = append(d.path, seg{idx: i}) }
func (d *scanner) pop() {
	last := d.path[len(d.path)-1]
	if last.idx == segName && last.s == len(d.names)-1 {
		d.names = d.names[:last.s]
	}
	d.path = d.path[:len(d.path)-1]
}

func (d *scanner) pointer() string {
	if len(d.path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range d.path {
		b.WriteByte('/')
		if s.idx >= 0 {
			b.WriteString(strconv.Itoa(s.idx))
			continue
		}
		var key string
		if s.idx == segKey {
			key = string(d.data[s.s:s.e])
		} else {
			key = d.names[s.s]
		}
		b.WriteString(PointerToken(key))
	}
	return b.String()
}

// fail returns a validation error at the current pointer.
func (d *scanner) fail(kind ErrorKind, format string, args ...any) *Error {
	return &Error{File: d.file, Pointer: d.pointer(), Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// syntax returns a syntax error at the current offset.
func (d *scanner) syntax(format string, args ...any) *Error {
	e := d.fail(KindSyntax, format, args...)
	e.Offset = d.i
	e.Line = 1 + bytes.Count(d.data[:min(d.i, len(d.data))], []byte{'\n'})
	e.Column = d.i - bytes.LastIndexByte(d.data[:min(d.i, len(d.data))], '\n')
	return e
}

// ws skips JSON whitespace. It spells the four bytes out rather than
// calling IsSpace, which costs the inliner more: ws is inlined into peek,
// and peek, which reads every token, must itself stay within the inlining
// budget (out of line, a 10,000-message decode is 3-5% slower).
// TestHotPathsAreInlined checks.
func (d *scanner) ws() {
	i, data := d.i, d.data
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			d.i = i
			return
		}
	}
	d.i = i
}

// peek returns the next non-space byte, or 0 at the end of input. Compact
// JSON, as pydantic-ai writes it, has no space to skip: that byte is
// returned before ws is called.
func (d *scanner) peek() byte {
	if d.i < len(d.data) && d.data[d.i] > ' ' {
		return d.data[d.i]
	}
	d.ws()
	if d.i >= len(d.data) {
		return 0
	}
	return d.data[d.i]
}

func (d *scanner) unexpected() *Error { return d.expected("") }

// expected is unexpected naming what the grammar allows there, when
// want is not empty: "unexpected character 'x' (expected ':')".
func (d *scanner) expected(want string) *Error {
	if want != "" {
		want = " (expected " + want + ")"
	}
	if d.i >= len(d.data) {
		return d.syntax("invalid JSON: unexpected end of input%s", want)
	}
	c := d.data[d.i]
	if c < 0x20 || c >= 0x7f {
		return d.syntax("invalid JSON: unexpected byte 0x%02x%s", c, want)
	}
	return d.syntax("invalid JSON: unexpected character %q%s", c, want)
}

// skipString reads a string starting at '"' and returns the extent of its
// raw contents (between the quotes) and whether it holds escapes.
//
// String contents are most of a history: the loop keeps the offset in a
// local (d.i is stored back on return) and passes the bytes that stand
// for themselves with StringStop.
func (d *scanner) skipString() (s, e int, esc bool, err *Error) {
	data := d.data
	i := d.i + 1 // opening quote
	s = i
	for {
		i = StringStop(data, i)
		if i >= len(data) {
			d.i = i
			return 0, 0, false, d.syntax("invalid JSON: unterminated string")
		}
		c := data[i]
		switch {
		case c == '"':
			d.i = i + 1
			return s, i, esc, nil
		case c == '\\':
			esc = true
			if i, err = d.escape(i); err != nil {
				return 0, 0, false, err
			}
		case c < 0x20:
			d.i = i
			return 0, 0, false, d.syntax("invalid JSON: control character 0x%02x in string", c)
		default: // c >= 0x80
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				d.i = i
				return 0, 0, false, d.syntax("invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// escape checks the escape sequence at data[i] (a '\\') and returns the
// offset after it, or its error, with the scanner at i.
func (d *scanner) escape(i int) (int, *Error) {
	data := d.data
	if i+1 >= len(data) {
		d.i = i
		return 0, d.syntax("invalid JSON: unterminated string")
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
		if i+6 > len(data) {
			d.i = i
			return 0, d.syntax("invalid JSON: bad \\u escape")
		}
		r, ok := hex4(data[i+2 : i+6])
		if !ok {
			d.i = i
			return 0, d.syntax("invalid JSON: bad \\u escape")
		}
		// A surrogate must come as a leading one followed by the \u
		// escape of a trailing one, as the reference's parser requires: a
		// lone one would decode to U+FFFD, so two different names could
		// collide.
		switch {
		case 0xdc00 <= r && r < 0xe000:
			d.i = i
			return 0, d.syntax("invalid JSON: lone UTF-16 surrogate \\u%04x", r)
		case 0xd800 <= r && r < 0xdc00:
			r2, ok := rune(0), false
			if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				r2, ok = hex4(data[i+8 : i+12])
			}
			if !ok || r2 < 0xdc00 || r2 >= 0xe000 {
				d.i = i
				return 0, d.syntax("invalid JSON: lone UTF-16 surrogate \\u%04x", r)
			}
			return i + 12, nil
		}
		return i + 6, nil
	}
	d.i = i
	return 0, d.syntax("invalid JSON: bad escape \\%c", data[i+1])
}

// IsSpace reports whether c is JSON whitespace (RFC 8259): a space, a
// tab, a line feed or a carriage return. The readers of JSON outside this
// package skip exactly what its scanner skips.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// StringStop returns the offset of the first byte of b from i on that a
// JSON string's reader must look at: '"', '\\', a control character
// below 0x20 or a byte of 0x80 and above; len(b) when there is none.
// Every other byte stands for itself in a string. It reads eight bytes at
// a time and finds the byte from the word's bits: most strings of a
// history are short keys and values, which a byte-by-byte finish would
// walk nearly whole.
func StringStop(b []byte, i int) int {
	for i+8 <= len(b) {
		if t := stops8(binary.LittleEndian.Uint64(b[i:])); t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
		i += 8
	}
	for i < len(b) && !strStop[b[i]] {
		i++
	}
	return i
}

// strStop marks the bytes at which skipString stops to look: '"', '\\',
// the control characters below 0x20 and the bytes of 0x80 and above.
var strStop = func() (t [256]bool) {
	for b := range t {
		t[b] = b < 0x20 || b == '"' || b == '\\' || b >= 0x80
	}
	return
}()

// stops8 returns a word whose lowest set bit is the high bit of the first
// byte of w at which skipString stops (see strStop), or zero when there is
// none. The tests are the classic "has a byte less than n" word trick: a
// false alarm can only sit above a true match (it is a borrow out of one),
// so the lowest set bit is exact.
func stops8(w uint64) uint64 {
	q := w ^ (lsb8 * '"')
	b := w ^ (lsb8 * '\\')
	t := (w - lsb8*0x20) &^ w // a byte below 0x20
	t |= (q - lsb8) &^ q      // a '"'
	t |= (b - lsb8) &^ b      // a '\\'
	return (t | w) & msb8     // w's high bits: non-ASCII bytes
}

// SWAR constants for stops8.
const (
	lsb8 = 0x0101010101010101
	msb8 = 0x8080808080808080
)

// hex4 decodes four hexadecimal digits.
func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// readString reads a string value and returns it decoded.
func (d *scanner) readString() (string, *Error) {
	if d.peek() != '"' {
		return "", d.unexpected()
	}
	s, e, esc, err := d.skipString()
	if err != nil {
		return "", err
	}
	if !esc {
		return string(d.data[s:e]), nil
	}
	return unescape(d.data[s-1 : e+1]), nil
}

// unescape decodes a quoted JSON string that skipString has validated.
func unescape(q []byte) string {
	var b strings.Builder
	b.Grow(len(q))
	for i := 1; i < len(q)-1; i++ {
		c := q[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch q[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, _ := strconv.ParseUint(string(q[i+1:i+5]), 16, 32)
			i += 4
			if utf16Surrogate(rune(r)) && i+6 < len(q) && q[i+1] == '\\' && q[i+2] == 'u' {
				r2, _ := strconv.ParseUint(string(q[i+3:i+7]), 16, 32)
				if c := decodeSurrogates(rune(r), rune(r2)); c != utf8.RuneError {
					b.WriteRune(c)
					i += 6
					continue
				}
			}
			b.WriteRune(rune(r))
		default: // '"', '\\', '/'
			b.WriteByte(q[i])
		}
	}
	return b.String()
}

func utf16Surrogate(r rune) bool { return 0xd800 <= r && r < 0xe000 }

func decodeSurrogates(r1, r2 rune) rune {
	if 0xd800 <= r1 && r1 < 0xdc00 && 0xdc00 <= r2 && r2 < 0xe000 {
		return (r1-0xd800)<<10 | (r2 - 0xdc00) + 0x10000
	}
	return utf8.RuneError
}

func (d *scanner) skipNumber() *Error {
	data := d.data
	if d.i < len(data) && data[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(data) && data[d.i] == '0':
		d.i++
	case d.i < len(data) && '1' <= data[d.i] && data[d.i] <= '9':
		for d.i < len(data) && '0' <= data[d.i] && data[d.i] <= '9' {
			d.i++
		}
	default:
		return d.unexpected()
	}
	if d.i < len(data) && data[d.i] == '.' {
		d.i++
		if d.i >= len(data) || data[d.i] < '0' || data[d.i] > '9' {
			return d.unexpected()
		}
		for d.i < len(data) && '0' <= data[d.i] && data[d.i] <= '9' {
			d.i++
		}
	}
	if d.i < len(data) && (data[d.i] == 'e' || data[d.i] == 'E') {
		d.i++
		if d.i < len(data) && (data[d.i] == '+' || data[d.i] == '-') {
			d.i++
		}
		if d.i >= len(data) || data[d.i] < '0' || data[d.i] > '9' {
			return d.unexpected()
		}
		for d.i < len(data) && '0' <= data[d.i] && data[d.i] <= '9' {
			d.i++
		}
	}
	return nil
}

func (d *scanner) literal(lit string) *Error {
	if !bytes.HasPrefix(d.data[d.i:], []byte(lit)) {
		return d.unexpected()
	}
	d.i += len(lit)
	return nil
}

// extension reads one of the number extensions the reference's JSON
// parser accepts as a value: NaN, Infinity, -Infinity. They are not JSON
// numbers; the decoder hands them to policies as strings (see
// Standardize).
func (d *scanner) extension(lit string) *Error {
	if d.strict {
		if !bytes.HasPrefix(d.data[d.i:], []byte(lit)) {
			return d.unexpected()
		}
		return d.syntax("invalid JSON: %s is not a JSON value", lit)
	}
	if err := d.literal(lit); err != nil {
		return err
	}
	d.extended = true
	return nil
}

// enter counts one more level of nesting, for an array or object that
// holds at least one value, and refuses it past maxDepth.
//
// The count is the reference's (jiter, pydantic-core's JSON parser, whose
// limit is 200): it steps down a level only to read a container's first
// value, so an empty array or object is never counted, and the rule is
// that every value lies inside at most maxDepth arrays and objects. A
// document may thus be maxDepth+1 levels deep when the deepest level is an
// empty [] or {}; one level more puts a value inside maxDepth+1 and is
// refused. The count starts at the outermost value read (for a history,
// its own array) and covers everything in it: a JSON string is one value
// whatever it spells, and a string parsed as JSON on its own (string
// tool arguments, see stringArgsID) starts a count of its own, as the
// reference's parser does when it reads it.
func (d *scanner) enter() *Error {
	d.depth++
	if d.depth > d.maxDepth {
		return d.fail(KindLimit, "nesting deeper than the limit of %d", d.maxDepth)
	}
	return nil
}

// SkipJSON checks the JSON value that begins at data[i], after any
// whitespace, and returns the offset just past it. The value is read as
// strictly as a history's JSON (RFC 8259 and UTF-8 only: invalid UTF-8,
// and a lone UTF-16 surrogate escape, are errors where encoding/json
// would read either as U+FFFD, so that two different strings could read
// as one), without the number extensions a history may hold (NaN,
// Infinity), and with every value in it inside at most maxDepth arrays
// and objects, its own counting as one (see Limits.MaxDepth: an empty []
// or {} adds no level). An error is an *Error of
// KindSyntax, or of KindLimit for the nesting, whose Offset counts in
// data and whose Pointer is where it is inside the value checked.
func SkipJSON(file string, data []byte, i, maxDepth int) (int, error) {
	end, err := skipJSON(file, data, i, maxDepth)
	if err != nil {
		return 0, err
	}
	return end, nil
}

func skipJSON(file string, data []byte, i, maxDepth int) (int, *Error) {
	d := &scanner{data: data, i: i, file: file, maxDepth: maxDepth, strict: true}
	if _, err := d.skipValue(); err != nil {
		err.Offset = d.i // a limit's error has none of its own
		return 0, err
	}
	return d.i, nil
}

// skipValue validates and skips one value, returning its extent.
func (d *scanner) skipValue() (span, *Error) {
	c := d.peek()
	s := d.i
	var err *Error
	switch {
	case c == '"':
		_, _, _, err = d.skipString()
	case c == '{':
		err = d.object(func([]byte) *Error {
			_, err := d.skipValue()
			return err
		})
	case c == '[':
		err = d.array(func(int) *Error {
			_, err := d.skipValue()
			return err
		})
	case c == 't':
		err = d.literal("true")
	case c == 'f':
		err = d.literal("false")
	case c == 'n':
		err = d.literal("null")
	case c == 'N':
		err = d.extension("NaN")
	case c == 'I':
		err = d.extension("Infinity")
	case c == '-' && d.i+1 < len(d.data) && d.data[d.i+1] == 'I':
		err = d.extension("-Infinity")
	case c == '-' || ('0' <= c && c <= '9'):
		err = d.skipNumber()
	default:
		err = d.unexpected()
	}
	if err != nil {
		return span{}, err
	}
	return span{s, d.i}, nil
}

// object reads an object, calling fn for each member with the key (raw
// bytes, valid until the next call) and the scanner positioned at the
// value; fn must consume the value. The key is on the path during fn.
func (d *scanner) object(fn func(key []byte) *Error) *Error {
	if d.peek() != '{' {
		return d.unexpected()
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return nil
	}
	if err := d.enter(); err != nil {
		return err
	}
	for {
		if d.peek() != '"' {
			return d.expected("a member name")
		}
		s, e, esc, err := d.skipString()
		if err != nil {
			return err
		}
		key := d.data[s:e]
		if esc {
			name := unescape(d.data[s-1 : e+1])
			key = []byte(name)
			d.push(name)
		} else {
			d.pushKey(s, e)
		}
		if d.peek() != ':' {
			return d.expected("':'")
		}
		d.i++
		if err := fn(key); err != nil {
			return err
		}
		d.pop()
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return nil
		default:
			return d.expected("',' or '}'")
		}
	}
}

// array reads an array, calling fn for each element index with the scanner
// positioned at the element; fn must consume it.
func (d *scanner) array(fn func(i int) *Error) *Error {
	if d.peek() != '[' {
		return d.unexpected()
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return nil
	}
	if err := d.enter(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		d.pushIdx(n)
		if err := fn(n); err != nil {
			return err
		}
		d.pop()
		if closed, err := d.afterElement(); closed || err != nil {
			return err
		}
	}
}

// afterElement reads what follows an array's element: a ',' (more
// follow), or the ']' that closes the array (closed).
func (d *scanner) afterElement() (closed bool, err *Error) {
	switch d.peek() {
	case ',':
		d.i++
		return false, nil
	case ']':
		d.i++
		d.depth--
		return true, nil
	}
	return false, d.expected("',' or ']'")
}

// at repositions the scanner on a value it has already validated, runs fn
// with key pushed on the path, and restores the position.
func (d *scanner) at(sp span, key string, fn func() *Error) *Error {
	saved, savedDepth := d.i, d.depth
	d.i = sp.s
	d.push(key)
	err := fn()
	if err == nil {
		d.pop()
	}
	d.i, d.depth = saved, savedDepth
	return err
}

// standardize returns the JSON value b with each number
// extension (NaN, Infinity, -Infinity) replaced by the JSON string of its
// name; b itself when it holds none.
func standardize(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == 'N' || c == 'I' || (c == '-' && i+1 < len(b) && b[i+1] == 'I'):
			lit := "NaN"
			switch c {
			case 'I':
				lit = "Infinity"
			case '-':
				lit = "-Infinity"
			}
			if !bytes.HasPrefix(b[i:], []byte(lit)) {
				continue // not valid JSON: left for the parser to reject
			}
			out = append(out, b[last:i]...)
			out = append(out, '"')
			out = append(out, lit...)
			out = append(out, '"')
			i += len(lit) - 1
			last = i + 1
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}
