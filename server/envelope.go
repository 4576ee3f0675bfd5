package server

import (
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// A request body holds a history of a megabyte or more; decoding it with
// encoding/json before the history decoder reads it again would double
// the cost of every request. The envelope is read once by wire's skim
// (wire.SkimEnvelope), which checks that the body is well-formed JSON
// (each member strictly, the history by the decoder) and returns the
// bytes of the members the handler wants, and the bytes of each element
// of the array members (the messages), which the prefix cache
// (intake.go) resumes after. With arrayHooks the caller reads those
// arrays itself: the history decoder then reads each message's bytes
// once, in the skim.

// arrayHooks let the caller read the kept arrays itself (see
// wire.EnvelopeSpec's Resume and Decode).
type arrayHooks struct {
	resume func(arr []byte) int
	decode func(arr []byte) (elems [][]byte, n int)
}

// scanEnvelope checks that body is one well-formed JSON object and
// returns its members named in known (the last of duplicates wins, as
// with encoding/json); arrays names the members whose elements it keeps.
// The elements of those members are only skimmed: the caller must decode
// them strictly (the history decoder does).
func scanEnvelope(body []byte, known []string, arrays ...string) (*wire.Envelope, *Error) {
	return scanEnvelopeWith(body, known, arrayHooks{}, arrays...)
}

// scanEnvelopeWith is scanEnvelope with hooks that read the kept arrays
// (see arrayHooks): the elements of a skipped prefix are not in the
// envelope's elements. A member's value nests at most
// loader.DefaultMaxDepth deep, as a history's values do.
func scanEnvelopeWith(body []byte, known []string, hooks arrayHooks, arrays ...string) (*wire.Envelope, *Error) {
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

// refuseUnknown refuses a body that has a member other than known, the
// members the endpoint reads, naming the first: a misspelt "context"
// would otherwise read as no context at all, and a deny rule that looks
// at the context would let the call through.
func refuseUnknown(env *wire.Envelope, known []string) *Error {
	if len(env.Unknown) == 0 {
		return nil
	}
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = strconv.Quote(k)
	}
	key := env.Unknown[0]
	return badRequest(CodeSchema, strconv.Quote(key)+" is not a member this endpoint reads: it reads "+strings.Join(names, ", "),
		"/"+wire.PointerToken(key))
}
