// Package render is policycheck's output layer: one renderer per format,
// pretty for people, json for machines, html for a browser and junit for
// CI (JUnit XML, junit.go), each over one document, Doc: a decision with
// the optional sections a command adds (its explanation, the facts alone,
// the Rego input document, a replay's diff, test's or check's JUnit
// suites). eval, explain, facts and replay print through it, and the
// sidecar's explain page, and test and check for junit; the names a
// --format flag accepts are checked in one place, Formats.Parse.
//
// The escaping is the same in every output:
//
//   - pretty writes every string that came from input (tool names,
//     tool_call_ids, messages, reasons, run and file names) through
//     internal/ground/printable, so that none can move the cursor or hide a line;
//   - json is written by internal/ground/jsonout: two-space indentation and <, >
//     and & as themselves (no HTML escaping; JSON is not HTML), the same
//     bytes the sidecar answers with;
//   - html goes through html/template's contextual escaping (the
//     explanation page makes control and bidirectional characters visible
//     first, internal/output/explainpage);
//   - junit is written by encoding/xml, which escapes markup and writes
//     the characters XML 1.0 forbids as U+FFFD.
//
// Adding a section (the flows of an explanation, the evidence of a
// decision) is a field of Doc, or of the engine type it holds, and a case
// in each renderer that draws it; a renderer asked for a section it has no
// form of returns an error, never an empty page.
package render

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/output/replay"
	"github.com/policycheck/policycheck/loader"
)

// Format names an output format.
type Format string

// The formats. Input is facts' own: the Rego input document, written as
// JSON.
const (
	Pretty Format = "pretty"
	JSON   Format = "json"
	HTML   Format = "html"
	Input  Format = "input"
	JUnit  Format = "junit"
)

// Formats is what one command's --format accepts: its formats, in the
// order its error lists them, and the older names it keeps as aliases.
type Formats struct {
	Accept  []Format
	Aliases map[string]Format
}

// Parse resolves an alias and checks that name is one of the accepted
// formats.
func (fs Formats) Parse(name string) (Format, error) {
	f := Format(name)
	if to, ok := fs.Aliases[name]; ok {
		f = to
	}
	for _, a := range fs.Accept {
		if f == a {
			return f, nil
		}
	}
	names := make([]string, len(fs.Accept))
	for i, a := range fs.Accept {
		names[i] = string(a)
	}
	return "", fmt.Errorf("--format must be %s, not %q", orList(names), name)
}

func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Doc is what a command prints: exactly one of its sections is set.
type Doc struct {
	// Decision is eval's decision document.
	Decision *engine.Decision
	// Explanation is explain's: the decision (its Decision) and why.
	Explanation *engine.Explanation
	// Facts are the facts alone, as facts and the sidecar's /v1/facts
	// print them.
	Facts *engine.FactsReport
	// Input is the input document the engine hands to Rego (facts
	// --format input); JSON only.
	Input any
	// Replay is a replay's report: the two sides' differences.
	Replay *replay.Report
	// Suites is a JUnit XML document (test's and check's results); junit
	// only.
	Suites *JUnitSuites
	// FailOn is the --fail-on gate a replay's changes are judged by: in
	// junit, each change it matches is a failure. Not a section.
	FailOn *replay.Gate
	// Transcript is the history decided, as the loader read it
	// (loader.DecodeTranscript): the explanation's page draws the
	// conversation from it.
	Transcript *loader.Transcript
}

// section returns the one section set, or an error.
func (d *Doc) section() (any, error) {
	var set []any
	if d.Decision != nil {
		set = append(set, d.Decision)
	}
	if d.Explanation != nil {
		set = append(set, d.Explanation)
	}
	if d.Facts != nil {
		set = append(set, d.Facts)
	}
	if d.Input != nil {
		set = append(set, d.Input)
	}
	if d.Replay != nil {
		set = append(set, d.Replay)
	}
	if d.Suites != nil {
		set = append(set, d.Suites)
	}
	if len(set) != 1 {
		return nil, fmt.Errorf("render: a document holds one section, not %d", len(set))
	}
	return set[0], nil
}

// Renderer writes a document in one format.
type Renderer interface {
	Render(w io.Writer, d *Doc) error
}

// For returns the renderer of f (Input is written by the JSON renderer).
func For(f Format) (Renderer, error) {
	switch f {
	case Pretty:
		return prettyRenderer{}, nil
	case JSON, Input:
		return jsonRenderer{}, nil
	case HTML:
		return htmlRenderer{}, nil
	case JUnit:
		return junitRenderer{}, nil
	}
	return nil, fmt.Errorf("render: no renderer of format %q", f)
}

// Write renders d in format f to w.
func Write(w io.Writer, f Format, d *Doc) error {
	r, err := For(f)
	if err != nil {
		return err
	}
	return r.Render(w, d)
}

// errNoForm is a section a renderer has no form of.
var errNoForm = errors.New("render: this section has no form in this format")

func noForm(f Format, v any) error {
	return fmt.Errorf("%w (%s of a %T)", errNoForm, f, v)
}
