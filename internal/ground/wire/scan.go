package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Scanner is a validating JSON reader over a byte slice. It checks the
// JSON grammar (RFC 8259, UTF-8 only) as the reference's parser reads it:
// the number extensions NaN, Infinity and -Infinity are values, a lone
// UTF-16 surrogate escape is an error. It enforces a nesting limit and
// keeps the JSON pointer of the value it is reading, so that every error
// names where it happened.
type Scanner struct {
	Data     []byte
	I        int
	Depth    int
	MaxDepth int
	// Extended is set once a number extension (NaN, Infinity,
	// -Infinity) has been read.
	Extended bool
	// Strict refuses the number extensions (see Skip).
	Strict bool
	File   string
	Path   []Seg
	Names  []string // keys of SegName segments
}

// Seg is one step of the JSON pointer: an array index, or a key given by
// name (key) or read from the input (raw, not copied: pushing it must not
// allocate, as every object member is pushed).
type Seg struct {
	// Idx >= 0 is an array index; SegKey is the raw (unescaped) key
	// Data[S:E]; SegName is the key Names[S]. A segment holds no pointer,
	// so pushing one on the hot path costs no GC write barrier.
	Idx, S, E int
}

// The Idx of a Seg that is a key.
const (
	SegKey  = -1
	SegName = -2
)

// Span is the extent of one JSON value inside Scanner.Data; E == 0 means
// absent.
type Span struct{ S, E int }

func (sp Span) Present() bool { return sp.E != 0 }

func (d *Scanner) Push(key string) {
	d.Names = append(d.Names, key)
	d.Path = append(d.Path, Seg{Idx: SegName, S: len(d.Names) - 1})
}

// PushKey pushes the key data[s:e], which holds no escape.
func (d *Scanner) PushKey(s, e int) { d.Path = append(d.Path, Seg{Idx: SegKey, S: s, E: e}) }
func (d *Scanner) PushIdx(i int)    { d.Path = append(d.Path, Seg{Idx: i}) }
func (d *Scanner) Pop() {
	last := d.Path[len(d.Path)-1]
	if last.Idx == SegName && last.S == len(d.Names)-1 {
		d.Names = d.Names[:last.S]
	}
	d.Path = d.Path[:len(d.Path)-1]
}

func (d *Scanner) Pointer() string {
	if len(d.Path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range d.Path {
		b.WriteByte('/')
		if s.Idx >= 0 {
			b.WriteString(strconv.Itoa(s.Idx))
			continue
		}
		var key string
		if s.Idx == SegKey {
			key = string(d.Data[s.S:s.E])
		} else {
			key = d.Names[s.S]
		}
		b.WriteString(PointerToken(key))
	}
	return b.String()
}

// Fail returns a validation error at the current pointer.
func (d *Scanner) Fail(kind ErrorKind, format string, args ...any) *Error {
	return &Error{File: d.File, Pointer: d.Pointer(), Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Syntax returns a syntax error at the current offset.
func (d *Scanner) Syntax(format string, args ...any) *Error {
	e := d.Fail(KindSyntax, format, args...)
	e.Offset = d.I
	e.Line = 1 + bytes.Count(d.Data[:min(d.I, len(d.Data))], []byte{'\n'})
	e.Column = d.I - bytes.LastIndexByte(d.Data[:min(d.I, len(d.Data))], '\n')
	return e
}

// WS skips JSON whitespace. It spells the four bytes out rather than
// calling IsSpace, which costs the inliner more: WS is inlined into Peek,
// and Peek, which reads every token, must itself stay within the inlining
// budget (out of line, a 10,000-message decode is 3-5% slower).
// TestHotPathsAreInlined checks.
func (d *Scanner) WS() {
	i, data := d.I, d.Data
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			d.I = i
			return
		}
	}
	d.I = i
}

// Peek returns the next non-space byte, or 0 at the end of input. Compact
// JSON, as pydantic-ai writes it, has no space to skip: that byte is
// returned before WS is called.
func (d *Scanner) Peek() byte {
	if d.I < len(d.Data) && d.Data[d.I] > ' ' {
		return d.Data[d.I]
	}
	d.WS()
	if d.I >= len(d.Data) {
		return 0
	}
	return d.Data[d.I]
}

func (d *Scanner) Unexpected() *Error { return d.Expected("") }

// Expected is Unexpected naming what the grammar allows there, when
// want is not empty: "unexpected character 'x' (expected ':')".
func (d *Scanner) Expected(want string) *Error {
	if want != "" {
		want = " (expected " + want + ")"
	}
	if d.I >= len(d.Data) {
		return d.Syntax("invalid JSON: unexpected end of input%s", want)
	}
	c := d.Data[d.I]
	if c < 0x20 || c >= 0x7f {
		return d.Syntax("invalid JSON: unexpected byte 0x%02x%s", c, want)
	}
	return d.Syntax("invalid JSON: unexpected character %q%s", c, want)
}

// SkipString reads a string starting at '"' and returns the extent of its
// raw contents (between the quotes) and whether it holds escapes.
//
// String contents are most of a history: the loop keeps the offset in a
// local (d.I is stored back on return) and passes the bytes that stand
// for themselves with StringStop.
func (d *Scanner) SkipString() (s, e int, esc bool, err *Error) {
	data := d.Data
	i := d.I + 1 // opening quote
	s = i
	for {
		i = StringStop(data, i)
		if i >= len(data) {
			d.I = i
			return 0, 0, false, d.Syntax("invalid JSON: unterminated string")
		}
		c := data[i]
		switch {
		case c == '"':
			d.I = i + 1
			return s, i, esc, nil
		case c == '\\':
			esc = true
			if i, err = d.escape(i); err != nil {
				return 0, 0, false, err
			}
		case c < 0x20:
			d.I = i
			return 0, 0, false, d.Syntax("invalid JSON: control character 0x%02x in string", c)
		default: // c >= 0x80
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				d.I = i
				return 0, 0, false, d.Syntax("invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// escape checks the escape sequence at data[i] (a '\\') and returns the
// offset after it, or its error, with the scanner at i.
func (d *Scanner) escape(i int) (int, *Error) {
	data := d.Data
	if i+1 >= len(data) {
		d.I = i
		return 0, d.Syntax("invalid JSON: unterminated string")
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
		if i+6 > len(data) {
			d.I = i
			return 0, d.Syntax("invalid JSON: bad \\u escape")
		}
		r, ok := Hex4(data[i+2 : i+6])
		if !ok {
			d.I = i
			return 0, d.Syntax("invalid JSON: bad \\u escape")
		}
		// A surrogate must come as a leading one followed by the \u
		// escape of a trailing one, as the reference's parser requires: a
		// lone one would decode to U+FFFD, so two different names could
		// collide.
		switch {
		case 0xdc00 <= r && r < 0xe000:
			d.I = i
			return 0, d.Syntax("invalid JSON: lone UTF-16 surrogate \\u%04x", r)
		case 0xd800 <= r && r < 0xdc00:
			r2, ok := rune(0), false
			if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				r2, ok = Hex4(data[i+8 : i+12])
			}
			if !ok || r2 < 0xdc00 || r2 >= 0xe000 {
				d.I = i
				return 0, d.Syntax("invalid JSON: lone UTF-16 surrogate \\u%04x", r)
			}
			return i + 12, nil
		}
		return i + 6, nil
	}
	d.I = i
	return 0, d.Syntax("invalid JSON: bad escape \\%c", data[i+1])
}

// IsSpace reports whether c is JSON whitespace (RFC 8259): a space, a
// tab, a line feed or a carriage return. The readers of JSON outside this
// package skip exactly what the Scanner skips.
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

// strStop marks the bytes at which SkipString stops to look: '"', '\\',
// the control characters below 0x20 and the bytes of 0x80 and above.
var strStop = func() (t [256]bool) {
	for b := range t {
		t[b] = b < 0x20 || b == '"' || b == '\\' || b >= 0x80
	}
	return
}()

// stops8 returns a word whose lowest set bit is the high bit of the first
// byte of w at which SkipString stops (see strStop), or zero when there is
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

// Hex4 decodes the four hexadecimal digits b starts with (a \u
// escape's); false when b is shorter or they are not hexadecimal digits.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
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

// ReadString reads a string value and returns it decoded.
func (d *Scanner) ReadString() (string, *Error) {
	if d.Peek() != '"' {
		return "", d.Unexpected()
	}
	s, e, esc, err := d.SkipString()
	if err != nil {
		return "", err
	}
	if !esc {
		return string(d.Data[s:e]), nil
	}
	return Unescape(d.Data[s-1 : e+1]), nil
}

// Unescape decodes a quoted JSON string that SkipString (or Skip) has
// validated.
func Unescape(q []byte) string {
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

func (d *Scanner) SkipNumber() *Error {
	data := d.Data
	if d.I < len(data) && data[d.I] == '-' {
		d.I++
	}
	switch {
	case d.I < len(data) && data[d.I] == '0':
		d.I++
	case d.I < len(data) && '1' <= data[d.I] && data[d.I] <= '9':
		for d.I < len(data) && '0' <= data[d.I] && data[d.I] <= '9' {
			d.I++
		}
	default:
		return d.Unexpected()
	}
	if d.I < len(data) && data[d.I] == '.' {
		d.I++
		if d.I >= len(data) || data[d.I] < '0' || data[d.I] > '9' {
			return d.Unexpected()
		}
		for d.I < len(data) && '0' <= data[d.I] && data[d.I] <= '9' {
			d.I++
		}
	}
	if d.I < len(data) && (data[d.I] == 'e' || data[d.I] == 'E') {
		d.I++
		if d.I < len(data) && (data[d.I] == '+' || data[d.I] == '-') {
			d.I++
		}
		if d.I >= len(data) || data[d.I] < '0' || data[d.I] > '9' {
			return d.Unexpected()
		}
		for d.I < len(data) && '0' <= data[d.I] && data[d.I] <= '9' {
			d.I++
		}
	}
	return nil
}

func (d *Scanner) Literal(lit string) *Error {
	if !bytes.HasPrefix(d.Data[d.I:], []byte(lit)) {
		return d.Unexpected()
	}
	d.I += len(lit)
	return nil
}

// Extension reads one of the number extensions the reference's JSON
// parser accepts as a value: NaN, Infinity, -Infinity. They are not JSON
// numbers; the decoder hands them to policies as strings (see
// Standardize).
func (d *Scanner) Extension(lit string) *Error {
	if d.Strict {
		if !bytes.HasPrefix(d.Data[d.I:], []byte(lit)) {
			return d.Unexpected()
		}
		return d.Syntax("invalid JSON: %s is not a JSON value", lit)
	}
	if err := d.Literal(lit); err != nil {
		return err
	}
	d.Extended = true
	return nil
}

// Enter counts one more level of nesting, for an array or object that
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
// tool arguments, see the loader's stringArgsID) starts a count of its
// own, as the
// reference's parser does when it reads it.
func (d *Scanner) Enter() *Error {
	d.Depth++
	if d.Depth > d.MaxDepth {
		return d.Fail(KindLimit, "nesting deeper than the limit of %d", d.MaxDepth)
	}
	return nil
}

// Skip checks the JSON value that begins at data[i], after any
// whitespace, and returns the offset just past it. The value is read as
// strictly as a history's JSON (RFC 8259 and UTF-8 only: invalid UTF-8,
// and a lone UTF-16 surrogate escape, are errors where encoding/json
// would read either as U+FFFD, so that two different strings could read
// as one), without the number extensions a history may hold (NaN,
// Infinity), and with every value in it inside at most maxDepth arrays
// and objects, its own counting as one (see loader.Limits.MaxDepth:
// an empty [] or {} adds no level). An error is an *Error of
// KindSyntax, or of KindLimit for the nesting, whose Offset counts in
// data and whose Pointer is where it is inside the value checked.
func Skip(file string, data []byte, i, maxDepth int) (int, *Error) {
	d := &Scanner{Data: data, I: i, File: file, MaxDepth: maxDepth, Strict: true}
	if _, err := d.SkipValue(); err != nil {
		err.Offset = d.I // a limit's error has none of its own
		return 0, err
	}
	return d.I, nil
}

// SkipValue validates and skips one value, returning its extent.
func (d *Scanner) SkipValue() (Span, *Error) {
	c := d.Peek()
	s := d.I
	var err *Error
	switch {
	case c == '"':
		_, _, _, err = d.SkipString()
	case c == '{':
		err = d.Object(func([]byte) *Error {
			_, err := d.SkipValue()
			return err
		})
	case c == '[':
		err = d.Array(func(int) *Error {
			_, err := d.SkipValue()
			return err
		})
	case c == 't':
		err = d.Literal("true")
	case c == 'f':
		err = d.Literal("false")
	case c == 'n':
		err = d.Literal("null")
	case c == 'N':
		err = d.Extension("NaN")
	case c == 'I':
		err = d.Extension("Infinity")
	case c == '-' && d.I+1 < len(d.Data) && d.Data[d.I+1] == 'I':
		err = d.Extension("-Infinity")
	case c == '-' || ('0' <= c && c <= '9'):
		err = d.SkipNumber()
	default:
		err = d.Unexpected()
	}
	if err != nil {
		return Span{}, err
	}
	return Span{s, d.I}, nil
}

// Object reads an object, calling fn for each member with the key (raw
// bytes, valid until the next call) and the scanner positioned at the
// value; fn must consume the value. The key is on the path during fn.
func (d *Scanner) Object(fn func(key []byte) *Error) *Error {
	if d.Peek() != '{' {
		return d.Unexpected()
	}
	d.I++
	if d.Peek() == '}' {
		d.I++
		return nil
	}
	if err := d.Enter(); err != nil {
		return err
	}
	for {
		if d.Peek() != '"' {
			return d.Expected("a member name")
		}
		s, e, esc, err := d.SkipString()
		if err != nil {
			return err
		}
		key := d.Data[s:e]
		if esc {
			name := Unescape(d.Data[s-1 : e+1])
			key = []byte(name)
			d.Push(name)
		} else {
			d.PushKey(s, e)
		}
		if d.Peek() != ':' {
			return d.Expected("':'")
		}
		d.I++
		if err := fn(key); err != nil {
			return err
		}
		d.Pop()
		switch d.Peek() {
		case ',':
			d.I++
		case '}':
			d.I++
			d.Depth--
			return nil
		default:
			return d.Expected("',' or '}'")
		}
	}
}

// Array reads an array, calling fn for each element index with the scanner
// positioned at the element; fn must consume it.
func (d *Scanner) Array(fn func(i int) *Error) *Error {
	if d.Peek() != '[' {
		return d.Unexpected()
	}
	d.I++
	if d.Peek() == ']' {
		d.I++
		return nil
	}
	if err := d.Enter(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		d.PushIdx(n)
		if err := fn(n); err != nil {
			return err
		}
		d.Pop()
		if closed, err := d.AfterElement(); closed || err != nil {
			return err
		}
	}
}

// AfterElement reads what follows an array's element: a ',' (more
// follow), or the ']' that closes the array (closed).
func (d *Scanner) AfterElement() (closed bool, err *Error) {
	switch d.Peek() {
	case ',':
		d.I++
		return false, nil
	case ']':
		d.I++
		d.Depth--
		return true, nil
	}
	return false, d.Expected("',' or ']'")
}

// At repositions the scanner on a value it has already validated, runs fn
// with key pushed on the path, and restores the position.
func (d *Scanner) At(sp Span, key string, fn func() *Error) *Error {
	saved, savedDepth := d.I, d.Depth
	d.I = sp.S
	d.Push(key)
	err := fn()
	if err == nil {
		d.Pop()
	}
	d.I, d.Depth = saved, savedDepth
	return err
}

// Standardize returns the JSON value b with each number
// extension (NaN, Infinity, -Infinity) replaced by the JSON string of its
// name; b itself when it holds none.
func Standardize(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			var ok bool
			if i, ok = StringEnd(b, i); !ok {
				i = len(b)
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
