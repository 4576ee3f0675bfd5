// Package loader reads and validates policycheck's inputs: pydantic-ai
// message histories (DecodeHistory, DecodeMessages, and DecodeArray for
// a history inside a larger document, decoded by concurrent goroutines;
// DecodeTranscript keeps what each message and part says, for a page
// that shows the conversation),
// tool registries in YAML or JSON (ReadRegistry, ParseRegistry),
// against the JSON Schemas in schema/ that ship with the project
// (ValidateHistoryBytes, ValidateHistorySchema, ValidateRegistrySchema).
//
// The decoder reads bytes with internal/ground/wire's Scanner, the project's one
// reader of JSON bytes; every other JSON input (a context, approvals, a
// JSON registry, the members of a sidecar request) is checked by the
// same scanner (wire.Skip): JSON and UTF-8 as strictly as a history,
// without the number extensions only a history may hold. Outside this
// package no production code decodes a history with encoding/json
// (docs' TestOneReaderOfHistories).
//
// The history decoder is the definition of the history format: a
// single-pass validating scanner whose rules the history schema states
// for operators, checked against it both ways by this package's tests, so
// that a service may skip the (slower) schema validation without letting
// anything invalid through. Reader is the one way the CLI, the sidecar and
// replay read a history: the decoder within Limits, and the schema on top
// when switched on (see Reader for which surface runs it). Limits bound
// size, message and part counts and nesting depth. Every error is an
// *Error naming the file, the JSON pointer of the offending value and the
// rule it broke.
package loader
