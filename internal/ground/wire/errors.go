package wire

import (
	"fmt"
	"strings"
)

// ErrorKind classifies an input error. The values are stable.
type ErrorKind string

// Error kinds.
const (
	// KindSyntax: the input is not well-formed JSON, YAML or UTF-8.
	KindSyntax ErrorKind = "syntax"
	// KindSchema: the input is well-formed but breaks a rule of the format.
	KindSchema ErrorKind = "schema"
	// KindLimit: the input exceeds a configured limit.
	KindLimit ErrorKind = "limit"
	// KindIO: the input could not be read.
	KindIO ErrorKind = "io"
)

// Error is an input that was rejected. It names the file, the JSON pointer
// of the offending value (RFC 6901; "" for the document root) and the rule
// it broke. Syntax errors also carry the byte offset, line and column.
type Error struct {
	File    string
	Pointer string
	Kind    ErrorKind
	Msg     string
	Offset  int
	Line    int
	Column  int
}

func (e *Error) Error() string {
	if e.Kind == KindIO && e.Pointer == "" {
		// The file could not be read: there is no document to point into.
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	ptr := e.Pointer
	if ptr == "" {
		ptr = "(root)"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s: %s (line %d, column %d)", e.File, ptr, e.Msg, e.Line, e.Column)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, ptr, e.Msg)
}

// PointerToken escapes s as one reference token of a JSON pointer (RFC
// 6901): '~' becomes "~0" and '/' becomes "~1". Every error's
// Pointer names object keys so.
func PointerToken(s string) string {
	return pointerEscaper.Replace(s)
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
