package wire

import (
	"bytes"
	"slices"
	"strings"
)

// SkimDepth bounds the nesting of a kept array's elements, which the
// envelope skim follows structurally only (the decoder that reads them
// next counts their depth as the reference does).
const SkimDepth = 512

// EnvelopeSpec says what SkimEnvelope keeps of an object.
type EnvelopeSpec struct {
	// File names the input in errors.
	File string
	// Known are the members whose values are kept; the others' names are
	// listed in Envelope.Unknown.
	Known []string
	// Arrays are the members whose elements are kept too, when their value
	// is an array. The elements are only skimmed (Skim): the caller must
	// decode them strictly (a history's decoder does).
	Arrays []string
	// MaxDepth bounds the nesting of every other member's value, read
	// strictly by Skip: at most MaxDepth arrays and objects, the member's
	// own value counting as one.
	MaxDepth int
	// Resume, when set, is offered each kept array at its '[': it returns
	// how many bytes, from the '[', form a prefix "[e0,...,ek" already
	// known to be well formed (0 for none), which the skim then skips.
	Resume func(arr []byte) int
	// Decode, when set, is offered each kept array that Resume did not
	// skip, at its '[': it returns the array's elements and its length,
	// up to its ']', having checked them strictly (the history decoder
	// does), or n == 0, and the skim then reads the array itself.
	Decode func(arr []byte) (elems [][]byte, n int)
}

// Envelope is what SkimEnvelope found in one JSON object.
type Envelope struct {
	// Members are the known members' values, raw; of a member given twice,
	// the last (as encoding/json reads it).
	Members map[string][]byte
	// Elements are the elements of the kept arrays (EnvelopeSpec.Arrays)
	// whose value, the last one given, is an array; the elements of a
	// prefix Resume skipped are not in it.
	Elements map[string][][]byte
	// Unknown are the other members' names, each once, in order.
	Unknown []string
	// For the last array member whose elements were kept: the offsets of
	// its '[' and of the end of its last element, and how many leading
	// bytes Resume let the skim skip.
	ArrStart, LastEnd, ResumedN int
}

// SkimEnvelope checks that body is one well-formed JSON object and
// returns the members spec names: every member's value is read strictly
// (Skip) but a kept array's elements, which are followed structurally
// (SkimValue) for the caller's decoder to read strictly. It is how the
// sidecar reads a request body: once, without decoding what the history
// decoder reads next.
//
// An error is an *Error whose Offset counts in body: of KindSchema when
// body is not an object ("must be a JSON object"), else of KindSyntax
// (KindLimit for a value nested past MaxDepth), with the Pointer of the
// member's value it is in ("" outside any, or inside a kept array whose
// prefix resumed).
func SkimEnvelope(body []byte, spec EnvelopeSpec) (*Envelope, *Error) {
	s := &envScan{b: body, spec: spec}
	env := &Envelope{Members: map[string][]byte{}, Elements: map[string][][]byte{}}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, s.at(KindSchema, "must be a JSON object", "")
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
	} else {
		for {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return nil, s.fail("expected a member name")
			}
			ks := s.i
			if err := s.skip(""); err != nil {
				return nil, err
			}
			key := string(s.b[ks+1 : s.i-1])
			if bytes.IndexByte(s.b[ks:s.i], '\\') >= 0 {
				key = Unescape(s.b[ks:s.i])
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return nil, s.fail("expected ':'")
			}
			s.i++
			s.ws()
			vs := s.i
			var elems *[][]byte
			keep := slices.Contains(spec.Known, key)
			if slices.Contains(spec.Arrays, key) {
				var list [][]byte
				elems = &list
			}
			if err := s.value(elems, "/"+PointerToken(key)); err != nil {
				return nil, err
			}
			if !keep && !slices.Contains(env.Unknown, key) {
				env.Unknown = append(env.Unknown, key)
			}
			if keep {
				env.Members[key] = s.b[vs:s.i]
				// Elements only for a value that is an array: a later
				// member of another type leaves none behind.
				if elems != nil && s.b[vs] == '[' {
					env.Elements[key] = *elems
					env.ArrStart, env.LastEnd, env.ResumedN = s.arrStart, s.lastEnd, s.resumedN
				} else {
					delete(env.Elements, key)
				}
			}
			closed, err := s.sepOrClose('}')
			if err != nil {
				return nil, err
			}
			if closed {
				break
			}
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, s.fail("unexpected data after the object")
	}
	return env, nil
}

// SkimValue returns the offset just past the value that begins at b[i]
// (after any whitespace): an array or object followed structurally
// (Skim, at most SkimDepth levels), any other value checked strictly
// (Skip, at most maxDepth levels). It is how the envelope passes over
// the elements of a kept array.
func SkimValue(file string, b []byte, i, maxDepth int) (int, *Error) {
	i = SkipSpace(b, i)
	if i >= len(b) || (b[i] != '{' && b[i] != '[') {
		return Skip(file, b, i, maxDepth)
	}
	end, fault := Skim(b, i, SkimDepth)
	if fault != "" {
		return 0, syntaxAt(file, b, end, "invalid JSON: "+fault, "")
	}
	return end, nil
}

type envScan struct {
	b     []byte
	i     int
	depth int
	spec  EnvelopeSpec
	// What the last kept array's skim saw (see Envelope).
	arrStart, lastEnd, resumedN int
}

func syntaxAt(file string, b []byte, off int, msg, ptr string) *Error {
	e := &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: msg, Offset: off}
	e.Line = 1 + bytes.Count(b[:min(off, len(b))], []byte{'\n'})
	e.Column = off - bytes.LastIndexByte(b[:min(off, len(b))], '\n')
	return e
}

// file is the input's name for an error (a copy: the spec, which
// holds the caller's lists, is not kept past the skim).
func (s *envScan) file() string { return strings.Clone(s.spec.File) }

func (s *envScan) at(kind ErrorKind, msg, ptr string) *Error {
	e := syntaxAt(s.file(), s.b, s.i, msg, ptr)
	e.Kind = kind
	return e
}

func (s *envScan) fail(msg string) *Error { return s.at(KindSyntax, "invalid JSON: "+msg, "") }

func (s *envScan) ws() { s.i = SkipSpace(s.b, s.i) }

// sepOrClose reads what follows a member or an element: a comma (more
// follow), or close, which ends the object or array (closed).
func (s *envScan) sepOrClose(close byte) (closed bool, err *Error) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ',' {
		s.i++
		return false, nil
	}
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return true, nil
	}
	return false, s.fail("expected ',' or '" + string(close) + "'")
}

// skip checks the value at s.i, the member ptr's or inside it, strictly
// (Skip), within what is left of MaxDepth at the skim's depth.
func (s *envScan) skip(ptr string) *Error {
	end, le := Skip("", s.b, s.i, s.spec.MaxDepth-s.depth)
	if le != nil {
		s.i = le.Offset
		le.File = s.file()
		le.Pointer = ptr + le.Pointer
		le.Line = 1 + bytes.Count(s.b[:min(s.i, len(s.b))], []byte{'\n'})
		le.Column = s.i - bytes.LastIndexByte(s.b[:min(s.i, len(s.b))], '\n')
		return le
	}
	s.i = end
	return nil
}

// value skips the value of the member ptr; with elems non-nil and the
// value an array, it appends the bytes of each element.
func (s *envScan) value(elems *[][]byte, ptr string) *Error {
	s.ws()
	if elems == nil || s.i >= len(s.b) || s.b[s.i] != '[' {
		return s.skip(ptr)
	}
	if s.depth++; s.depth > SkimDepth {
		return s.fail("nested too deeply")
	}
	arr := s.i
	s.i++
	resumed := false
	s.arrStart, s.lastEnd, s.resumedN = arr, arr+1, 0
	if s.spec.Resume != nil {
		if n := s.spec.Resume(s.b[arr:]); n > 1 {
			s.i, s.lastEnd, s.resumedN, resumed = arr+n, arr+n, n, true
		}
	}
	if !resumed && s.spec.Decode != nil {
		if got, n := s.spec.Decode(s.b[arr:]); n > 0 {
			*elems = got
			s.i = arr + n
			if len(got) > 0 {
				s.lastEnd = s.i - 1
				for IsSpace(s.b[s.lastEnd-1]) {
					s.lastEnd--
				}
			}
			s.depth--
			return nil
		}
	}
	if !resumed {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			s.depth--
			return nil
		}
	}
	for {
		if !resumed {
			s.ws()
			start := s.i
			// The member's pointer, not the element's: after a resumed
			// prefix the skim does not know the elements' indices.
			if err := s.element(ptr); err != nil {
				return err
			}
			*elems = append(*elems, s.b[start:s.i])
			s.lastEnd = s.i
		}
		resumed = false
		if closed, err := s.sepOrClose(']'); err != nil || closed {
			s.depth--
			return err
		}
	}
}

// element passes over one element of a kept array (SkimValue): the
// structure only, at memchr speed, for the decoder that reads its bytes
// strictly afterwards; a scalar is checked as usual.
func (s *envScan) element(ptr string) *Error {
	s.ws()
	if s.i >= len(s.b) || (s.b[s.i] != '{' && s.b[s.i] != '[') {
		return s.skip(ptr)
	}
	end, fault := Skim(s.b, s.i, SkimDepth)
	s.i = end
	if fault != "" {
		return s.fail(fault)
	}
	return nil
}

// SkimArray returns the elements of the array that begins at b[i] (after
// any whitespace) and the offset just past it, each element passed over
// as SkimValue does: an array or object structurally, any other value
// strictly (at most maxDepth levels). It reads what kind of document a
// file holds (a history, a list of decision-log events) before the
// reader of that kind reads it strictly. An error is an *Error: of
// KindSchema when the value is not an array, else as SkimEnvelope's.
func SkimArray(file string, b []byte, i, maxDepth int) (elems [][]byte, end int, err *Error) {
	s := &envScan{b: b, i: i, spec: EnvelopeSpec{File: file, MaxDepth: maxDepth}}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return nil, s.i, s.at(KindSchema, "must be a JSON array", "")
	}
	elems = [][]byte{}
	if err := s.value(&elems, ""); err != nil {
		return nil, s.i, err
	}
	return elems, s.i, nil
}

// Valid reports whether b is one JSON value, read strictly (Skip: UTF-8
// only, no number extension, at most maxDepth levels), with nothing but
// whitespace around it.
func Valid(b []byte, maxDepth int) bool {
	end, err := Skip("", b, 0, maxDepth)
	return err == nil && SkipSpace(b, end) == len(b)
}
