package loader

import (
	"bytes"
	"errors"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// ValidateHistoryBytes validates a history document against the shipped
// JSON Schema. A Reader with Schema set runs it on top of DecodeHistory
// (the CLI and replay by default, the sidecar with --schema); where it
// runs, it runs after the decoder has accepted the bytes, and so it never
// rejects anything on its own: the decoder rejects every history the
// schema rejects (see Reader for why it is a switch all the same). Errors
// are *Error values.
//
// The number extensions DecodeHistory accepts (NaN, Infinity, -Infinity)
// are validated as the strings policies see them as.
func ValidateHistoryBytes(file string, data []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(wire.Standardize(data)))
	if err != nil {
		return &Error{File: file, Kind: KindSyntax, Msg: "invalid JSON: " + err.Error()}
	}
	return asError(ValidateHistorySchema(file, doc))
}

// asError turns a *SchemaError into an *Error, so that callers match one
// error type.
func asError(err error) error {
	var se *SchemaError
	if errors.As(err, &se) {
		return &Error{File: se.File, Pointer: se.Pointer, Kind: KindSchema, Msg: se.Msg}
	}
	return err
}
