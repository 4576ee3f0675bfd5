package server

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/internal/wire"
	"github.com/policycheck/policycheck/loader"
)

// A request body holds a history of a megabyte or more; decoding it with
// encoding/json before the history decoder reads it again would double
// the cost of every request. scanEnvelope walks the body once, checking
// that it is well-formed JSON (each member by wire.Skip, the
// history by the decoder), and returns the bytes of the members the
// handler wants, and the bytes of each element of the array members (the
// messages), which the prefix cache (intake.go) resumes after. With
// arrayHooks the caller reads those arrays itself: the history decoder
// then reads each message's bytes once, in the scan.

type envelope struct {
	members  map[string][]byte   // known members, raw
	elements map[string][][]byte // elements of the known members that are arrays
	unknown  []string            // the other members' names, each once, in order (see refuseUnknown)
	// For the last array member whose elements were kept: the offsets in
	// the body of its '[' and of the end of its last element, and how
	// many leading bytes resume let the scan skip.
	arrStart, lastEnd, resumedN int
}

type jscan struct {
	b     []byte
	i     int
	depth int
	arrayHooks
	// What the last kept array's scan saw (see envelope).
	arrStart, lastEnd, resumedN int
}

// arrayHooks let the caller read the kept arrays itself.
type arrayHooks struct {
	// resume, when set, is offered each kept array at its '[': it returns
	// how many bytes, from the '[', form a prefix "[e0,...,ek" already
	// known to be well formed (0 for none), which the scan then skips.
	resume func(arr []byte) int
	// decode, when set, is offered each kept array that resume did not
	// skip, at its '[': it returns the array's elements and its length,
	// up to its ']', having checked them strictly (the history decoder
	// does), or n == 0, and the scan then reads the array itself.
	decode func(arr []byte) (elems [][]byte, n int)
}

const maxEnvelopeDepth = 512

func (s *jscan) fail(msg string) *Error {
	return badRequest(CodeSyntax, "invalid JSON at byte "+strconv.Itoa(s.i)+": "+msg, "")
}

// sepOrClose reads what follows a member or an element: a comma (more
// follow), or close, which ends the object or array (closed).
func (s *jscan) sepOrClose(close byte) (closed bool, err *Error) {
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

func (s *jscan) ws() { s.i = wire.SkipSpace(s.b, s.i) }

// skip checks the value at s.i, the member ptr's or inside it, with the
// wire scanner (wire.Skip), as policycheck eval checks its
// --context: the server reads JSON by the history decoder's one
// definition of it, under which invalid UTF-8 or a lone surrogate escape
// is an error rather than a U+FFFD that two different strings would read
// as, and a member's value nests at most loader.DefaultMaxDepth deep.
func (s *jscan) skip(ptr string) *Error {
	end, le := wire.Skip("request", s.b, s.i, loader.DefaultMaxDepth-s.depth)
	if le != nil {
		s.i = le.Offset
		return badRequest(CodeSyntax, "invalid JSON at byte "+strconv.Itoa(le.Offset)+": "+strings.TrimPrefix(le.Msg, "invalid JSON: "), ptr+le.Pointer)
	}
	s.i = end
	return nil
}

// value skips the value of the member ptr; with elems non-nil and the
// value an array, it appends the bytes of each element.
func (s *jscan) value(elems *[][]byte, ptr string) *Error {
	s.ws()
	if elems == nil || s.i >= len(s.b) || s.b[s.i] != '[' {
		return s.skip(ptr)
	}
	if s.depth++; s.depth > maxEnvelopeDepth {
		return s.fail("nested too deeply")
	}
	arr := s.i
	s.i++
	resumed := false
	s.arrStart, s.lastEnd, s.resumedN = arr, arr+1, 0
	if s.resume != nil {
		if n := s.resume(s.b[arr:]); n > 1 {
			s.i, s.lastEnd, s.resumedN, resumed = arr+n, arr+n, n, true
		}
	}
	if !resumed && s.decode != nil {
		if got, n := s.decode(s.b[arr:]); n > 0 {
			*elems = got
			s.i = arr + n
			if len(got) > 0 {
				s.lastEnd = s.i - 1
				for wire.IsSpace(s.b[s.lastEnd-1]) {
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
			// prefix the scan does not know the elements' indices.
			if err := s.fastSkip(ptr); err != nil {
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

// fastSkip skips one array element of a member whose elements are kept
// (a history): it only tracks strings and nesting, at memchr speed,
// because the history decoder checks those bytes strictly afterwards;
// scalars are checked as usual.
func (s *jscan) fastSkip(ptr string) *Error {
	s.ws()
	if s.i >= len(s.b) || (s.b[s.i] != '{' && s.b[s.i] != '[') {
		return s.skip(ptr)
	}
	end, fault := wire.Skim(s.b, s.i, maxEnvelopeDepth)
	s.i = end
	if fault != "" {
		return s.fail(fault)
	}
	return nil
}

// scanEnvelope checks that body is one well-formed JSON object and
// returns its members named in known (the last of duplicates wins, as
// with encoding/json); arrays names the members whose elements it keeps.
// The elements of those members are only skipped structurally: the
// caller must decode them strictly (the history decoder does).
func scanEnvelope(body []byte, known []string, arrays ...string) (*envelope, *Error) {
	return scanEnvelopeWith(body, known, arrayHooks{}, arrays...)
}

// scanEnvelopeWith is scanEnvelope with hooks that read the kept arrays
// (see arrayHooks): the elements of a skipped prefix are not in the
// envelope's elements.
func scanEnvelopeWith(body []byte, known []string, hooks arrayHooks, arrays ...string) (*envelope, *Error) {
	s := &jscan{b: body, arrayHooks: hooks}
	env := &envelope{members: map[string][]byte{}, elements: map[string][][]byte{}}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, badRequest(CodeSyntax, "the body must be a JSON object", "")
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
				key = wire.Unescape(s.b[ks:s.i])
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return nil, s.fail("expected ':'")
			}
			s.i++
			s.ws()
			vs := s.i
			var elems *[][]byte
			keep := false
			for _, k := range known {
				keep = keep || k == key
			}
			for _, k := range arrays {
				if k == key {
					var list [][]byte
					elems = &list
				}
			}
			if err := s.value(elems, "/"+wire.PointerToken(key)); err != nil {
				return nil, err
			}
			if !keep && !slices.Contains(env.unknown, key) {
				env.unknown = append(env.unknown, key)
			}
			if keep {
				env.members[key] = s.b[vs:s.i]
				// Elements only for a value that is an array: a later
				// member of another type leaves none behind.
				if elems != nil && s.b[vs] == '[' {
					env.elements[key] = *elems
					env.arrStart, env.lastEnd, env.resumedN = s.arrStart, s.lastEnd, s.resumedN
				} else {
					delete(env.elements, key)
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

// refuseUnknown refuses a body that has a member other than known, the
// members the endpoint reads, naming the first: a misspelt "context"
// would otherwise read as no context at all, and a deny rule that looks
// at the context would let the call through.
func (env *envelope) refuseUnknown(known []string) *Error {
	if len(env.unknown) == 0 {
		return nil
	}
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = strconv.Quote(k)
	}
	key := env.unknown[0]
	return badRequest(CodeSchema, strconv.Quote(key)+" is not a member this endpoint reads: it reads "+strings.Join(names, ", "),
		"/"+wire.PointerToken(key))
}

// skimEnvelope reads a request body's envelope with wire.SkimEnvelope
// (each member's value strict, the history's elements skimmed for the
// decoder) and turns its error into the request's 400.
func skimEnvelope(body []byte, known []string, hooks arrayHooks, arrays ...string) (*wire.Envelope, *Error) {
	env, err := wire.SkimEnvelope(body, wire.EnvelopeSpec{File: "request", Known: known, Arrays: arrays,
		MaxDepth: loader.DefaultMaxDepth, Resume: hooks.resume, Decode: hooks.decode})
	if err != nil {
		return nil, envelopeError(err)
	}
	return env, nil
}

// envelopeError is a body the envelope skim refused, as a 400: its byte
// offset and what was found there, or that the body is no object.
func envelopeError(e *wire.Error) *Error {
	if e.Kind == wire.KindSchema {
		return badRequest(CodeSyntax, "the body "+e.Msg, "")
	}
	return badRequest(CodeSyntax, "invalid JSON at byte "+strconv.Itoa(e.Offset)+": "+strings.TrimPrefix(e.Msg, "invalid JSON: "), e.Pointer)
}
