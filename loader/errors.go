package loader

import (
	"errors"
	"io/fs"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// ErrorKind classifies a loader error. The values are stable.
type ErrorKind = wire.ErrorKind

// Error kinds.
const (
	// KindSyntax: the input is not well-formed JSON, YAML or UTF-8.
	KindSyntax = wire.KindSyntax
	// KindSchema: the input is well-formed but breaks a rule of the format.
	KindSchema = wire.KindSchema
	// KindLimit: the input exceeds a configured limit.
	KindLimit = wire.KindLimit
	// KindIO: the input could not be read.
	KindIO = wire.KindIO
)

// Error is an input that was rejected. It names the file, the JSON pointer
// of the offending value (RFC 6901; "" for the document root) and the rule
// it broke. Syntax errors also carry the byte offset, line and column.
type Error = wire.Error

// IOError is the *Error of a file that could not be read: the file and the
// reason, without the file name repeated ("no such file or directory",
// not "open f: no such file or directory").
func IOError(file string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return &Error{File: file, Kind: KindIO, Msg: msg}
}
