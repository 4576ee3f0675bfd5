package loader

import (
	"bytes"
	"errors"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/policycheck/policycheck/internal/wire"
)

// ValidateHistoryBytes validates a history document against the shipped
// JSON Schema. The CLI and the HTTP sidecar run it at their boundary, on
// top of DecodeHistory, so that an input is only ever accepted when both
// agree. Errors are *Error values.
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
