package facts

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// The flow index's walk of a return's content (addPart): the leaves
// walkFlowValue visits in the value encoding/json decodes from the
// content, read from the content's bytes with the wire scanner instead,
// in the same order, without building the value.
//
// The two agree by construction on what the wire scanner accepts: a
// value it reads strictly (RFC 8259, UTF-8, no lone surrogate escape,
// no number extension, every value inside at most flowScanDepth arrays
// and objects) is one encoding/json reads, whose strings unescape the
// same (wire.Unescape) and whose numbers have the same text. What the
// scanner refuses (invalid JSON, and the few things encoding/json reads
// where the scanner does not: invalid UTF-8 and lone surrogates read as
// U+FFFD, nesting between flowScanDepth and encoding/json's limit, data
// after a top-level value) is read as before, with encoding/json, so
// that the index is the same whatever the content (flowscan_test.go
// keeps the old walk and compares).

// flowScanDepth is the nesting the scanner reads: every value inside at
// most this many arrays and objects is at most one level deeper than
// encoding/json's limit of 10,000 levels counts (an empty innermost [] or
// {}), within it.
const flowScanDepth = 9999

// flowLeaf is one leaf of a content's walk: a string of at least the
// minimum length, or a number's key (num). Its bytes are the content's
// [s:e], or, when text, the walker's text[s:e]. A leaf and a member hold
// no pointer, so that putting an object's members in order moves plain
// memory.
type flowLeaf struct {
	s, e      int
	text, num bool
}

// flowMember is one member of an object being walked: its key, text[ks:ke],
// and the leaves its key and value emitted, leaves[from:to].
type flowMember struct {
	ks, ke, from, to int
}

// flowWalker is the reusable scratch of the walk of one content at a
// time.
type flowWalker struct {
	minLen  int
	content []byte
	// text holds what is not in the content: object keys, unescaped
	// strings, number keys. It only grows during a walk, so that a
	// scanner reading an unescaped string in it reads bytes that stay.
	text    []byte
	leaves  []flowLeaf
	members []flowMember
	tmp     []flowLeaf
	scan    [flowNestDepth + 1]wire.Scanner
}

// bytes returns a leaf's bytes.
func (w *flowWalker) bytes(l *flowLeaf) []byte {
	if l.text {
		return w.text[l.s:l.e]
	}
	return w.content[l.s:l.e]
}

// walkContent walks a return's content into w.leaves and reports whether it
// is JSON (read as json.Decoder reads a stream's first value); when it
// is not, its leaves are none.
func (w *flowWalker) walkContent(data []byte) bool {
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
	walkFlowValue(v, 0, w.minLen, w.emit)
	return true
}

// emit appends a leaf of walkFlowValue.
func (w *flowWalker) emit(s string, isNum bool) bool {
	n := len(w.text)
	w.text = append(w.text, s...)
	w.leaves = append(w.leaves, flowLeaf{s: n, e: len(w.text), text: true, num: isNum})
	return true
}

// value walks buf[s:e] (buf the content, or w.text when text), one JSON
// value with only whitespace around it, at nesting depth (of JSON inside
// strings), and reports whether the scanner read it; when it did not,
// the leaves and members it added are dropped.
func (w *flowWalker) value(buf []byte, s, e int, text bool, depth int) bool {
	leaves, members := len(w.leaves), len(w.members)
	d := &w.scan[depth]
	*d = wire.Scanner{Data: buf[:e], I: s, MaxDepth: flowScanDepth, Strict: true, Path: d.Path[:0], Names: d.Names[:0]}
	if w.walk(d, text, depth) != nil || wire.SkipSpace(d.Data, d.I) != e {
		w.leaves, w.members = w.leaves[:leaves], w.members[:members]
		return false
	}
	return true
}

// walk reads the value at d (over the content, or w.text when text) and
// emits its leaves in walkFlowValue's order.
func (w *flowWalker) walk(d *wire.Scanner, text bool, depth int) *wire.Error {
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
			m := flowMember{ks: len(w.text), from: len(w.leaves)}
			w.text = append(w.text, key...)
			m.ke = len(w.text)
			if len(key) >= w.minLen {
				w.leaves = append(w.leaves, flowLeaf{s: m.ks, e: m.ke, text: true})
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
		if w.text, ok = appendFlowNumberKey(w.text, d.Data[s:d.I]); ok {
			w.leaves = append(w.leaves, flowLeaf{s: n, e: len(w.text), text: true, num: true})
		}
	default:
		_, err := d.SkipValue()
		return err
	}
	return nil
}

// str emits the string buf[s:e] (buf the content, or w.text when text)
// and the leaves of the JSON object or array it holds, as walkFlowValue
// does.
func (w *flowWalker) str(s, e int, text bool, depth int) {
	if e-s >= w.minLen {
		w.leaves = append(w.leaves, flowLeaf{s: s, e: e, text: text})
	}
	if depth >= flowNestDepth {
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
		walkFlowValue(v, depth+1, w.minLen, w.emit)
	}
}

// sortMembers puts the leaves of the object whose members are
// w.members[base:] (its leaves w.leaves[from:]) in walkFlowValue's
// order: keys sorted, a key given twice read once, with its last value,
// as encoding/json decodes it.
func (w *flowWalker) sortMembers(from, base int) {
	ms := w.members[base:]
	key := func(m flowMember) []byte { return w.text[m.ks:m.ke] }
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
	slices.SortStableFunc(ms, func(a, b flowMember) int { return bytes.Compare(key(a), key(b)) })
	w.tmp = w.tmp[:0]
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(key(m), key(ms[i+1])) {
			continue // the last of equal keys is kept
		}
		w.tmp = append(w.tmp, w.leaves[m.from:m.to]...)
	}
	w.leaves = append(w.leaves[:from], w.tmp...)
}
