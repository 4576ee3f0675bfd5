package cli

import "github.com/policycheck/policycheck/internal/output/render"

// Output formats follow opa's vocabulary: pretty for people, json for
// machines, and a command's own formats where it needs them (facts'
// input). Older names are kept as documented aliases. What each command's
// --format accepts is listed here; the names are checked in one place,
// render.Formats.Parse, and eval, explain, facts and replay print through
// internal/output/render.
var (
	evalFormats    = render.Formats{Accept: []render.Format{render.JSON, render.Pretty}}
	explainFormats = render.Formats{Accept: []render.Format{render.Pretty, render.JSON, render.HTML}, Aliases: textAlias}
	factsFormats   = render.Formats{Accept: []render.Format{render.JSON, render.Input},
		Aliases: map[string]render.Format{"facts": render.JSON}} // facts' json before the shared vocabulary
	replayFormats = render.Formats{Accept: []render.Format{render.Pretty, render.JSON, render.HTML, render.JUnit}}
	checkFormats  = render.Formats{Accept: []render.Format{render.Pretty, render.JSON, render.JUnit}, Aliases: textAlias}
	testFormats   = render.Formats{Accept: []render.Format{render.Pretty, render.JSON, render.JUnit}}
	// prettyOrJSON: version and conformance.
	prettyOrJSON = render.Formats{Accept: []render.Format{render.Pretty, render.JSON}}
)

// textAlias: explain's and check's pretty before the shared vocabulary.
var textAlias = map[string]render.Format{"text": render.Pretty}

// parseFormat checks a --format value against what the command accepts:
// a wrong one is bad usage (exit 2).
func parseFormat(fs render.Formats, name string) (render.Format, error) {
	f, err := fs.Parse(name)
	if err != nil {
		return "", badInput(err)
	}
	return f, nil
}
