// Package jsonout writes the JSON policycheck prints and serves: two-space
// indentation, no HTML escaping, a final newline, byte for byte what a
// json.Encoder so configured writes (its tests hold it to that), so that
// policycheck eval's output and the sidecar's answer are one format. A
// value that marshals itself (a decision) is indented from its
// MarshalJSON output in one pass. JoinArray joins JSON values into one
// array.
package jsonout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// Write writes v to w as Encode formats it, in one write.
func Write(w io.Writer, v any) error {
	var buf bytes.Buffer
	if err := Encode(&buf, v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Encode appends v to buf as a json.Encoder with two-space indentation
// and no HTML escaping writes it. A value that marshals itself (a
// decision) is indented straight from its MarshalJSON: the Encoder would
// first scan that output again to compact it, which for a decision
// listing a thousand tools cost a run step about a third of its CPU
// (BENCHMARKS.md).
func Encode(buf *bytes.Buffer, v any) error {
	if m, ok := v.(json.Marshaler); ok {
		raw, err := m.MarshalJSON()
		if err != nil {
			return err
		}
		buf.Grow(2*len(raw) + 1)
		out, ok := indent(buf.AvailableBuffer(), raw)
		if !ok {
			return fmt.Errorf("an unterminated string in the JSON of a %T", v)
		}
		buf.Write(out)
		return buf.WriteByte('\n')
	}
	enc := json.NewEncoder(buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// indent appends src, a JSON value a MarshalJSON wrote, to dst as
// json.Indent with no prefix and a two-space indent writes it. json.Indent
// steps its JSON state machine for every byte, strings included: for a
// decision listing a thousand tools that was half the cost of writing
// it. The engine's MarshalJSON methods write valid JSON (their tests
// check), so only strings need care here: they are copied up to their
// closing quote; ok is false when one has none.
func indent(dst, src []byte) (_ []byte, ok bool) {
	// As json.Indent, leading space is dropped and trailing space kept.
	end := len(bytes.TrimRight(src, " \t\r\n"))
	dst = slices.Grow(dst, 2*len(src))
	depth := 0
	open := false // after '{' or '[': the newline waits for a member
	for i := 0; i < end; i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if open && c != '}' && c != ']' {
			open = false
			depth++
			dst = newline(dst, depth)
		}
		switch c {
		case '"':
			j, ok := wire.StringEnd(src[:end], i)
			if !ok {
				return dst, false
			}
			dst = append(dst, src[i:j+1]...)
			i = j
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = newline(append(dst, c), depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				dst = newline(dst, depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, src[end:]...), true
}

// newline appends a newline and depth two-space indents.
func newline(dst []byte, depth int) []byte {
	dst = append(dst, '\n')
	for range depth {
		dst = append(dst, ' ', ' ')
	}
	return dst
}

// Marshal returns v as compact JSON written as Encode writes strings: <,
// > and & as themselves. The engine's MarshalJSON methods and the
// arguments pretty output quotes are written with it.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// JoinArray copies elems, each a JSON value, into one JSON array,
// "[e,e,...]", with no space or newline added.
func JoinArray(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}
