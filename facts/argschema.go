package facts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ArgsSchema is a tool's parameters_json_schema (the field of pydantic-ai's
// ToolDefinition), compiled once per registry. It is immutable and safe
// for concurrent use.
type ArgsSchema struct {
	sch      *jsonschema.Schema
	required []string // the top-level "required" keys, sorted
	object   bool     // the top level says "type": "object"
	// expansion is the schema's size with its $refs followed, at most
	// MaxArgsSchemaExpansion; recursive, whether a $ref leads back into
	// a schema that holds it (validationSteps).
	expansion int
	recursive bool
}

// Requires reports whether the schema requires the top-level argument
// field: its own "required" list names it. A requirement the schema only
// states through allOf, $ref or a conditional is not seen (and so not
// relied on).
func (a *ArgsSchema) Requires(field string) bool {
	_, ok := slices.BinarySearch(a.required, field)
	return ok
}

// Forbids reports whether the schema refuses every call whose arguments
// hold the top-level field, whatever its value: the schema is false, or
// the field's own property schema is false, or no property or pattern
// property names it and additionalProperties is false. What the schema
// only forbids through allOf, $ref or a conditional is not seen (Forbids
// is then false).
func (a *ArgsSchema) Forbids(field string) bool {
	isFalse := func(s *jsonschema.Schema) bool { return s != nil && s.Bool != nil && !*s.Bool }
	if isFalse(a.sch) {
		return true
	}
	if p, ok := a.sch.Properties[field]; ok {
		return isFalse(p)
	}
	matched := false
	for re, p := range a.sch.PatternProperties {
		if re.MatchString(field) {
			if !isFalse(p) {
				return false
			}
			matched = true
		}
	}
	if matched {
		return true // additionalProperties does not apply to it
	}
	switch ap := a.sch.AdditionalProperties.(type) {
	case bool:
		return !ap
	case *jsonschema.Schema:
		return isFalse(ap)
	}
	return false
}

// Lists reports whether the schema's top level names the field: in
// "properties", or by a "patternProperties" pattern that matches it.
func (a *ArgsSchema) Lists(field string) bool {
	if _, ok := a.sch.Properties[field]; ok {
		return true
	}
	for re := range a.sch.PatternProperties {
		if re.MatchString(field) {
			return true
		}
	}
	return false
}

// PropertyNames are the names the schema's top-level "properties" lists,
// sorted.
func (a *ArgsSchema) PropertyNames() []string {
	names := make([]string, 0, len(a.sch.Properties))
	for n := range a.sch.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// argsSchemaURL is the base URL a tool's schema is compiled under; it is
// never fetched.
const argsSchemaURL = "https://policycheck.dev/registry/tools/"

// refuseLoader refuses every URL: a tool's schema must be self-contained
// (a $ref to a file or a web page would read the operator's disk or the
// network at load).
type refuseLoader struct{ field string }

func (l refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a %s must be self-contained: it refers to %s, which is not read", l.field, url)
}

// compileArgsSchema compiles one tool's schema (draft 2020-12 unless the
// schema's $schema says otherwise). ptr is the pointer inside the schema
// of what is wrong, when known.
func compileArgsSchema(i int, raw json.RawMessage) (a *ArgsSchema, ptr string, err error) {
	return compileSchema(argsSchemaURL+strconv.Itoa(i)+"/parameters_json_schema.json", "parameters_json_schema", raw)
}

// contextSchemaURL is the URL the registry's context_schema is compiled
// under; it is never fetched.
const contextSchemaURL = "https://policycheck.dev/registry/context_schema.json"

// compileSchema compiles the schema of the registry field named field
// under url, within the expansion bound of MaxArgsSchemaExpansion.
func compileSchema(url, field string, raw json.RawMessage) (a *ArgsSchema, ptr string, err error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, "", fmt.Errorf("%s is not JSON: %w", field, err)
	}
	obj, isObj := doc.(map[string]any)
	if !isObj {
		return nil, "", fmt.Errorf("%s must be a JSON Schema object", field)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(refuseLoader{field})
	if err := comp.AddResource(url, doc); err != nil {
		return nil, "", fmt.Errorf("%s: %w", field, err)
	}
	sch, err := comp.Compile(url)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		if errors.As(err, &sve) {
			var ve *jsonschema.ValidationError
			if errors.As(sve.Err, &ve) {
				leaf := firstLeaf(ve)
				return nil, pointerOf(leaf.InstanceLocation), fmt.Errorf("%s is not a valid JSON Schema: %s", field,
					leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
			}
		}
		return nil, "", fmt.Errorf("%s does not compile: %s", field, strings.ReplaceAll(err.Error(), url, "the schema"))
	}
	size, recursive, ptr, err := checkExpansion(sch, field)
	if err != nil {
		return nil, ptr, err
	}
	a = &ArgsSchema{sch: sch, expansion: size, recursive: recursive}
	a.object = obj["type"] == "object"
	if req, ok := obj["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				a.required = append(a.required, s)
			}
		}
		slices.Sort(a.required)
	}
	return a, "", nil
}

// ArgsProblem is one reason a call's arguments fail its tool's schema:
// the JSON pointer of the offending value inside the arguments ("" for
// the arguments themselves) and what is wrong.
type ArgsProblem struct {
	Pointer string `json:"pointer"`
	Reason  string `json:"reason"`
}

// MaxArgsProblems bounds the problems ValidateArgs reports (the rest are
// counted).
const MaxArgsProblems = 5

// maxReason bounds one problem's reason.
const maxReason = 160

// ValidateArgs validates a call's raw arguments (the history's JSON: an
// object, a string holding JSON, or null) against the schema, as
// pydantic-ai validates a call before it runs the tool: a string is
// parsed as JSON (an empty one is {}), null or no arguments are {}. It
// returns nil when they validate, else the problems, at most
// MaxArgsProblems, in a stable order, and how many more there were.
func (a *ArgsSchema) ValidateArgs(raw []byte) (probs []ArgsProblem, omitted int) {
	return a.Validate(ReadArgs(raw))
}

// validate validates a value ReadArgs read.
func (a *ArgsSchema) validate(v any) (probs []ArgsProblem, omitted int) {
	err := a.sch.Validate(v)
	if err == nil {
		return nil, 0
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []ArgsProblem{{Reason: clip(err.Error())}}, 0
	}
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	p := message.NewPrinter(language.English)
	out := make([]ArgsProblem, 0, len(leaves))
	for _, l := range leaves {
		pr := ArgsProblem{Pointer: pointerOf(l.InstanceLocation), Reason: l.ErrorKind.LocalizedString(p)}
		if !slices.Contains(out, pr) {
			out = append(out, pr)
		}
	}
	// Clipped once told apart: two long keys may share their start.
	defer func() {
		for i := range probs {
			probs[i].Pointer, probs[i].Reason = clip(probs[i].Pointer), clip(probs[i].Reason)
		}
	}()
	slices.SortFunc(out, func(x, y ArgsProblem) int {
		if c := strings.Compare(x.Pointer, y.Pointer); c != 0 {
			return c
		}
		return strings.Compare(x.Reason, y.Reason)
	})
	if len(out) > MaxArgsProblems {
		return out[:MaxArgsProblems], len(out) - MaxArgsProblems
	}
	return out, 0
}

func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		e = e.Causes[0]
	}
	return e
}

// pointerOf writes a JSON pointer (RFC 6901) of its tokens.
func pointerOf(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func clip(s string) string {
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason - 3
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
