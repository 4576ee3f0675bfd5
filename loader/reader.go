package loader

import "github.com/policycheck/policycheck/facts"

// Reader reads a history's bytes: the decoder within Limits and, with
// Schema, the shipped JSON Schema on top. It is the one reader the CLI
// (eval, explain, test, ...), the HTTP sidecar and replay share, and
// DefaultReader is its one default; each surface changes it only where
// its flags say (--max-bytes and the other limits, --no-schema for the
// CLI and replay, --schema for the sidecar, whose body limit also bounds
// MaxBytes). The sidecar decodes a request's history where it lies, in
// pieces (DecodeArray, DecodeMessages), under its Reader's Limits, and
// validates it with its CheckSchema.
//
// Why the schema is a switch and not gone: the decoder is the
// definition of the format, and it rejects every history the schema
// rejects (FuzzHistorySchemaAgreement, TestDecoderRejectsWhatSchemaRejects)
// and accepts what it accepts where both read the same document
// (TestDecoderRejectsHostileMutations, TestDecoderTypesAreTheSchemas,
// TestDecoderKeysAreTheSchemas), so with the decoder alone nothing
// invalid gets through. The CLI and replay still run the schema by
// default, one file per run, because that is their documented default
// (--no-schema turns it off) and it makes every file a user hands in a
// check of the published contract; the sidecar, where it would cost every
// request about ten times the decode, runs it only with --schema.
type Reader struct {
	// Limits bound what the decoder accepts (see Limits).
	Limits Limits
	// Schema also validates a history the decoder accepted against the
	// JSON Schema (ValidateHistoryBytes).
	Schema bool
}

// DefaultReader is the reader used where nothing else is configured:
// DefaultLimits, and the decoder alone.
func DefaultReader() Reader { return Reader{Limits: DefaultLimits()} }

// Read decodes a whole history (DecodeHistory) and, with r.Schema,
// validates it against the schema. Errors are *Error values.
func (r Reader) Read(file string, data []byte) (facts.History, error) {
	h, err := DecodeHistory(file, data, r.Limits)
	if err != nil {
		return nil, err
	}
	if err := r.CheckSchema(file, data); err != nil {
		return nil, err
	}
	return h, nil
}

// CheckSchema validates data, a history or a batch of messages the
// decoder accepted, against the schema when r.Schema is set; nil
// otherwise.
func (r Reader) CheckSchema(file string, data []byte) error {
	if !r.Schema {
		return nil
	}
	return ValidateHistoryBytes(file, data)
}
