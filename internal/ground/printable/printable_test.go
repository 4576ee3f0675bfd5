package printable_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/ground/printable"
)

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"get_time":           "get_time",
		`a\b 'q' "d" é 日本 😀`: `a\b 'q' "d" é 日本 😀`,
		"\x1b[2K":            `\x1b[2K`,
		"a\r\n\tb":           `a\r\n\tb`,
		"\x00\x7f":           `\x00\x7f`,
		"\u0085\u009b\u00a0": `\x85\x9b\xa0`,
		"\u202e\u200b\u2028": `\u202e\u200b\u2028`,
		"\ufeff\U000e0001":   `\ufeff\U000e0001`,
		"\ufffd":             "\ufffd",
		"a\xffb\xc3":         `a\xffb\xc3`,
	} {
		if got := printable.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapeInQuotes(t *testing.T) {
	var b strings.Builder
	printable.Escape(&b, "it's \\ \x1b", '\'')
	if got, want := b.String(), `it\'s \\ \x1b`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFprintfEscapesArgumentsNotTheFormat(t *testing.T) {
	var b strings.Builder
	printable.Fprintf(&b, "%s %s %v %d\n%s\n", "a\rb", []string{"\x1b", "ok"}, errors.New("e\n"), 7, []byte("\x07"))
	if got, want := b.String(), "a\\rb [\\x1b ok] e\\n 7\n\\x07\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLines(t *testing.T) {
	in := "1 error occurred: p\x1b[2K.rego:3: rego_parse_error\n\tdeny \u202e{\n\t^"
	want := "1 error occurred: p\\x1b[2K.rego:3: rego_parse_error\n\tdeny \\u202e{\n\t^"
	if got := printable.Lines(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if s := "ok\n\tsource"; printable.Lines(s) != s {
		t.Errorf("Lines changed %q", s)
	}
}
