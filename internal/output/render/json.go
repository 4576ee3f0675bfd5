package render

import (
	"fmt"
	"io"

	"github.com/policycheck/policycheck/internal/ground/jsonout"
)

// jsonRenderer writes a document's section with WriteJSON.
type jsonRenderer struct{}

func (jsonRenderer) Render(w io.Writer, d *Doc) error {
	v, err := d.section()
	if err != nil {
		return err
	}
	if _, ok := v.(*JUnitSuites); ok {
		return noForm(JSON, v)
	}
	return WriteJSON(w, v)
}

// WriteJSON writes v as every JSON output of policycheck is written
// (internal/ground/jsonout): two-space indentation, <, > and & as themselves, a
// final newline, in one write. Commands whose results are not decisions
// (check, test, version, conformance) write theirs with it too.
func WriteJSON(w io.Writer, v any) error {
	if err := jsonout.Write(w, v); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
