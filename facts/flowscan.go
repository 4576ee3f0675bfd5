package facts

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/policycheck/policycheck/internal/wire"
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
// minimum length (its bytes b, or s when it had escapes) or a number's
// key (num, in b).
type flowLeaf struct {
	b   []byte
	s   string
	num bool
}

// flowMember is one member of an object being walked: its key and the
// leaves its key and value emitted, walk.leaves[from:to].
type flowMember struct {
	key      []byte
	from, to int
}

// flowWalker is the reusable scratch of the walk of one content at a
// time.
type flowWalker struct {
	minLen  int
	leaves  []flowLeaf
	members []flowMember
	tmp     []flowLeaf
	arena   []byte // number keys
	scan    [flowNestDepth + 1]wire.Scanner
}

// content walks a return's content into w.leaves and reports whether it
// is JSON (read as json.Decoder reads a stream's first value); when it
// is not, its leaves are none.
func (w *flowWalker) content(data []byte) bool {
	w.leaves, w.members, w.arena = w.leaves[:0], w.members[:0], w.arena[:0]
	if w.value(data, 0) {
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
	w.leaves = append(w.leaves, flowLeaf{s: s, num: isNum})
	return true
}

// value walks data, one JSON value with only whitespace around it, at
// nesting depth (of JSON inside strings), and reports whether the
// scanner read it; when it did not, the leaves and members it added are
// dropped.
func (w *flowWalker) value(data []byte, depth int) bool {
	leaves, members := len(w.leaves), len(w.members)
	d := &w.scan[depth]
	*d = wire.Scanner{Data: data, MaxDepth: flowScanDepth, Strict: true, Path: d.Path[:0], Names: d.Names[:0]}
	if w.walk(d, depth) != nil || wire.SkipSpace(data, d.I) != len(data) {
		w.leaves, w.members = w.leaves[:leaves], w.members[:members]
		return false
	}
	return true
}

// walk reads the value at d and emits its leaves in walkFlowValue's
// order.
func (w *flowWalker) walk(d *wire.Scanner, depth int) *wire.Error {
	switch c := d.Peek(); {
	case c == '"':
		s, e, esc, err := d.SkipString()
		if err != nil {
			return err
		}
		if esc {
			w.str(nil, wire.Unescape(d.Data[s-1:e+1]), depth)
		} else {
			w.str(d.Data[s:e], "", depth)
		}
	case c == '{':
		from, base := len(w.leaves), len(w.members)
		err := d.Object(func(key []byte) *wire.Error {
			m := flowMember{key: key, from: len(w.leaves)}
			if len(key) >= w.minLen {
				w.leaves = append(w.leaves, flowLeaf{b: key})
			}
			if err := w.walk(d, depth); err != nil {
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
		return d.Array(func(int) *wire.Error { return w.walk(d, depth) })
	case c == '-' || ('0' <= c && c <= '9'):
		s := d.I
		if err := d.SkipNumber(); err != nil {
			return err
		}
		n := len(w.arena)
		var ok bool
		if w.arena, ok = appendFlowNumberKey(w.arena, d.Data[s:d.I]); ok {
			w.leaves = append(w.leaves, flowLeaf{b: w.arena[n:len(w.arena):len(w.arena)], num: true})
		}
	default:
		_, err := d.SkipValue()
		return err
	}
	return nil
}

// str emits a string (b, or s when unescaped) and the leaves of the JSON
// object or array it holds, as walkFlowValue does.
func (w *flowWalker) str(b []byte, s string, depth int) {
	n := len(b)
	if s != "" {
		n = len(s)
	}
	if n >= w.minLen {
		w.leaves = append(w.leaves, flowLeaf{b: b, s: s})
	}
	if depth >= flowNestDepth {
		return
	}
	if s != "" {
		if t := firstNonSpace(s); t != '{' && t != '[' {
			return
		}
		b = []byte(s)
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return
	}
	if w.value(t, depth+1) {
		return
	}
	if v, ok := nestedJSON(string(t)); ok {
		walkFlowValue(v, depth+1, w.minLen, w.emit)
	}
}

// firstNonSpace returns the first byte of s after any leading space as
// strings.TrimSpace trims it (Unicode white space), or 0.
func firstNonSpace(s string) byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\v', '\f', '\r':
		default:
			if c >= 0x80 { // Unicode space: let bytes.TrimSpace decide
				return '{'
			}
			return c
		}
	}
	return 0
}

// sortMembers puts the leaves of the object whose members are
// w.members[base:] (its leaves w.leaves[from:]) in walkFlowValue's
// order: keys sorted, a key given twice read once, with its last value,
// as encoding/json decodes it.
func (w *flowWalker) sortMembers(from, base int) {
	ms := w.members[base:]
	sorted := true
	for i := 1; i < len(ms); i++ {
		if bytes.Compare(ms[i-1].key, ms[i].key) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	slices.SortStableFunc(ms, func(a, b flowMember) int { return bytes.Compare(a.key, b.key) })
	w.tmp = w.tmp[:0]
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(m.key, ms[i+1].key) {
			continue // the last of equal keys is kept
		}
		w.tmp = append(w.tmp, w.leaves[m.from:m.to]...)
	}
	w.leaves = append(w.leaves[:from], w.tmp...)
}
