package render

import (
	"bytes"
	"errors"
	"testing"

	"github.com/policycheck/policycheck/engine"
)

func TestFormatsParse(t *testing.T) {
	fs := Formats{Accept: []Format{Pretty, JSON, HTML}, Aliases: map[string]Format{"text": Pretty}}
	for name, want := range map[string]Format{"pretty": Pretty, "json": JSON, "html": HTML, "text": Pretty} {
		if got, err := fs.Parse(name); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	_, err := fs.Parse("yaml")
	if err == nil || err.Error() != `--format must be pretty, json or html, not "yaml"` {
		t.Errorf("Parse(yaml): %v", err)
	}
	// An alias a command does not keep is not accepted.
	if _, err := (Formats{Accept: []Format{JSON, Pretty}}).Parse("text"); err == nil ||
		err.Error() != `--format must be json or pretty, not "text"` {
		t.Errorf("Parse(text) without the alias: %v", err)
	}
}

// TestOneSection: a document holds one section; a renderer refuses a
// document with none or two, and a section it has no form of, rather
// than print nothing.
func TestOneSection(t *testing.T) {
	d := &engine.Decision{Available: []string{}, Advertised: []string{}, Calls: []engine.CallVerdict{}}
	for _, f := range []Format{Pretty, JSON, HTML, JUnit} {
		var buf bytes.Buffer
		if err := Write(&buf, f, &Doc{}); err == nil {
			t.Errorf("%s of an empty document: no error", f)
		}
		if err := Write(&buf, f, &Doc{Decision: d, Facts: &engine.FactsReport{}}); err == nil {
			t.Errorf("%s of two sections: no error", f)
		}
	}
	for _, tc := range []struct {
		f   Format
		doc *Doc
	}{{Pretty, &Doc{Facts: &engine.FactsReport{}}}, {HTML, &Doc{Decision: d}}, {Pretty, &Doc{Input: map[string]any{}}},
		{JUnit, &Doc{Decision: d}}, {JSON, &Doc{Suites: &JUnitSuites{}}}, {Pretty, &Doc{Suites: &JUnitSuites{}}}} {
		var buf bytes.Buffer
		if err := Write(&buf, tc.f, tc.doc); !errors.Is(err, errNoForm) || buf.Len() > 0 {
			t.Errorf("%s of %+v: %v, %q", tc.f, tc.doc, err, buf.String())
		}
	}
	if _, err := For("yaml"); err == nil {
		t.Error("For(yaml): no error")
	}
}
