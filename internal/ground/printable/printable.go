// Package printable escapes text for a person's terminal: the one
// escaping of strings that came from input (tool names, tool_call_ids,
// run names, messages, approvers) wherever policycheck prints for people,
// and of the names the engine quotes in model-facing messages (Python's
// repr, spec X4). A character a terminal would act on rather than show (a
// control character such as ESC or CR, a format character such as a
// bidirectional override, a line separator) is written as Python's repr
// writes it, so that a crafted id cannot move the cursor, erase a line or
// hide the verdict printed after it.
package printable

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape writes s to b with every character that is not printable
// escaped as Python's repr escapes it: \n, \r and \t; \xNN for the other
// characters up to U+00FF (the C0 and C1 controls, DEL, the no-break
// space); \uNNNN and \UNNNNNNNN beyond. A byte that is not UTF-8 is
// written \xNN. Printable characters (unicode.IsPrint, and all of ASCII
// from the space to the tilde) are written as they are. With quote other
// than 0, the backslash and quote are escaped too, as inside a repr's
// quotes.
func Escape(b *strings.Builder, s string, quote rune) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(b, `\x%02x`, s[i-1])
		case quote != 0 && (r == quote || r == '\\'):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x80 || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
}

// String is s escaped (see Escape, with no quote): s itself when it has
// nothing to escape. The backslash is kept, so that text already escaped
// (a model-facing message quoting a name) reads the same.
func String(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	Escape(&b, s, 0)
	return b.String()
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && !unicode.IsPrint(r)) {
			return false
		}
	}
	return utf8.ValidString(s) // a byte that is not UTF-8 ranges as U+FFFD
}

// Lines is s escaped but for its line feeds and tabs, for text of
// several lines that holds strings from input: an error as OPA reports
// it, over several lines with its source indented by tabs.
func Lines(s string) string {
	if isPrintable(strings.NewReplacer("\n", "", "\t", "").Replace(s)) {
		return s
	}
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		for j, piece := range strings.Split(line, "\t") {
			if j > 0 {
				b.WriteByte('\t')
			}
			Escape(&b, piece, 0)
		}
	}
	return b.String()
}

// Fprintf is fmt.Fprintf with every string argument escaped (String): a
// string, a []byte, an error, a fmt.Stringer or a []string
// (escaped element by element). The format itself, the program's own
// text, is written as it is, newlines and all.
func Fprintf(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, Args(args...)...)
}

// Args returns args with every string argument escaped, as Fprintf
// escapes them, for a caller that formats with fmt itself.
func Args(args ...any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = String(v)
		case []byte:
			out[i] = String(string(v))
		case []string:
			e := make([]string, len(v))
			for j, s := range v {
				e[j] = String(s)
			}
			out[i] = e
		case error:
			out[i] = String(v.Error())
		case fmt.Stringer:
			out[i] = String(v.String())
		default:
			out[i] = a
		}
	}
	return out
}
