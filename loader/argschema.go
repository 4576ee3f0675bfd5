package loader

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/policycheck/policycheck/facts"
)

// argsSchema is a registry's JSON Schema compiled (a tool's
// parameters_json_schema, or the context_schema): the facts.Schema
// CompileSchema returns. It is immutable and safe for concurrent use.
type argsSchema struct {
	sch *jsonschema.Schema
	// field is the registry field the schema is ("parameters_json_schema",
	// "context_schema"), for the message of a value too costly to validate.
	field    string
	required []string // the top-level "required" keys, sorted
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
func (a *argsSchema) Requires(field string) bool {
	_, ok := slices.BinarySearch(a.required, field)
	return ok
}

// Forbids reports whether the schema refuses every call whose arguments
// hold the top-level field, whatever its value: the schema is false, or
// the field's own property schema is false, or no property or pattern
// property names it and additionalProperties is false. What the schema
// only forbids through allOf, $ref or a conditional is not seen (Forbids
// is then false).
func (a *argsSchema) Forbids(field string) bool {
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
func (a *argsSchema) Lists(field string) bool {
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
func (a *argsSchema) PropertyNames() []string {
	names := make([]string, 0, len(a.sch.Properties))
	for n := range a.sch.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// schemaURL is the base URL a registry's schemas are compiled under; it
// is never fetched.
const schemaURL = "https://policycheck.dev/registry/"

// refuseLoader refuses every URL: a registry's schema must be
// self-contained (a $ref to a file or a web page would read the
// operator's disk or the network at load).
type refuseLoader struct{ field string }

func (l refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a %s must be self-contained: it refers to %s, which is not read", l.field, url)
}

// CompileSchema is the registry's facts.SchemaCompiler, which
// ParseRegistry gives facts.NewRegistry: it compiles one JSON Schema of a
// registry (field is "parameters_json_schema" of the tool at index tool,
// or "context_schema" with tool -1), draft 2020-12 unless the schema's
// $schema says otherwise. The schema must be a self-contained object
// (no $ref to another document is read) whose expansion, with its $refs
// followed, stays within MaxArgsSchemaExpansion; validating a value
// against it costs at most MaxArgsValidationSteps steps, a value past
// that is refused without validating. ptr is the JSON pointer, inside
// the schema, of what is wrong, when known.
func CompileSchema(field string, tool int, raw []byte) (s facts.Schema, ptr string, err error) {
	url := schemaURL + field + ".json"
	if tool >= 0 {
		url = schemaURL + "tools/" + strconv.Itoa(tool) + "/" + field + ".json"
	}
	a, ptr, err := compileSchema(url, field, raw)
	if err != nil {
		return nil, ptr, err
	}
	return a, "", nil
}

// compileSchema compiles the schema of the registry field named field
// under url, within the expansion bound of MaxArgsSchemaExpansion.
func compileSchema(url, field string, raw []byte) (a *argsSchema, ptr string, err error) {
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
	a = &argsSchema{sch: sch, field: field, expansion: size, recursive: recursive}
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

// Validate validates a JSON value (facts.Schema): past
// MaxArgsValidationSteps, one problem saying so; else nil when it
// validates, or its problems, at most facts.MaxArgsProblems, sorted by
// pointer and reason, without duplicates, and how many more there were.
// Pointers and reasons are not clipped (package facts clips them).
func (a *argsSchema) Validate(v any) (probs []facts.ArgsProblem, omitted int) {
	if !validationSteps(a, v) {
		if a.field == "context_schema" {
			return []facts.ArgsProblem{{Reason: fmt.Sprintf("validating this context against the registry's context_schema would take more than %d steps: send a smaller or less deeply nested context",
				MaxArgsValidationSteps)}}, 0
		}
		return []facts.ArgsProblem{{Reason: fmt.Sprintf("validating these arguments against the tool's schema would take more than %d steps: send smaller or less deeply nested arguments",
			MaxArgsValidationSteps)}}, 0
	}
	return a.validate(v)
}

// validate validates a value facts.ReadArgs read.
func (a *argsSchema) validate(v any) (probs []facts.ArgsProblem, omitted int) {
	err := a.sch.Validate(v)
	if err == nil {
		return nil, 0
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []facts.ArgsProblem{{Reason: err.Error()}}, 0
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
	out := make([]facts.ArgsProblem, 0, len(leaves))
	for _, l := range leaves {
		pr := facts.ArgsProblem{Pointer: pointerOf(l.InstanceLocation), Reason: l.ErrorKind.LocalizedString(p)}
		if !slices.Contains(out, pr) {
			out = append(out, pr)
		}
	}
	// Clipped (by package facts) once told apart: two long keys may share
	// their start.
	slices.SortFunc(out, func(x, y facts.ArgsProblem) int {
		if c := strings.Compare(x.Pointer, y.Pointer); c != 0 {
			return c
		}
		return strings.Compare(x.Reason, y.Reason)
	})
	if len(out) > facts.MaxArgsProblems {
		return out[:facts.MaxArgsProblems], len(out) - facts.MaxArgsProblems
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

// Declassifies reports whether the schema constrains the value at the
// JSON pointer ptr of the arguments to few values (facts.Schema): an
// enum or a const, the type boolean alone, or the type integer alone
// with both a lower and an upper bound. The schema of the value is
// reached from the top by "properties", "prefixItems" and "items"
// (draft 2020-12, and the array form of older drafts), through $ref and
// the members of allOf; a value the schema reaches only through anyOf,
// oneOf, a conditional or patternProperties is not declassified.
func (a *argsSchema) Declassifies(ptr string) bool {
	toks, ok := argsPointerTokens(ptr)
	return ok && newReach(constrained, false).reaches(a.sch, toks, 0)
}

// Names reports whether the last token of the JSON pointer ptr, an
// object key of the arguments, is a name the schema lists in the
// "properties" of the value holding it (facts.Schema): the value reached
// from the top as Declassifies reaches one, the key named by it or by a
// schema it conjoins ($ref, allOf) or offers (anyOf, oneOf: a key the
// operator wrote in any of them is no text the model chose; pydantic's
// Optional[Model] is an anyOf). A key only "additionalProperties" or
// "patternProperties" admits, or one under such a key, is the model's
// choice and not named; so is every key of a schema that does not reach
// its parent, and the pointer "" (no key).
func (a *argsSchema) Names(ptr string) bool {
	toks, ok := argsPointerTokens(ptr)
	if !ok || len(toks) == 0 {
		return false
	}
	key := toks[len(toks)-1]
	return newReach(func(s *jsonschema.Schema) bool {
		_, listed := s.Properties[key]
		return listed
	}, true).reaches(a.sch, toks[:len(toks)-1], 0)
}

// argsPointerTokens are the unescaped tokens of a JSON pointer; false for a
// string that is not one.
func argsPointerTokens(ptr string) ([]string, bool) {
	if ptr != "" && !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	toks := strings.Split(ptr, "/")[1:]
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, true
}

// maxDeclassifyDepth bounds the hops Declassifies and Names follow from
// the top (a recursive schema would loop).
const maxDeclassifyDepth = 64

// reach is one search of Declassifies or Names: at is what the schema
// reached must satisfy; alternatives follows anyOf and oneOf too. Each
// (schema, place in the pointer) is visited once: without that, a
// schema holding allOf: [{$ref: "#"}, {$ref: "#"}] (which loads, and
// which an upstream may list) doubled the search at every hop, 2^64
// steps, and the call never got a decision.
type reach struct {
	at           func(*jsonschema.Schema) bool
	alternatives bool
	seen         map[reachStep]bool
}

type reachStep struct {
	sch  *jsonschema.Schema
	rest int
}

func newReach(at func(*jsonschema.Schema) bool, alternatives bool) *reach {
	return &reach{at: at, alternatives: alternatives, seen: map[reachStep]bool{}}
}

// reaches reports whether sch, or a schema it conjoins ($ref, allOf; and
// anyOf, oneOf with alternatives), reaches the value at toks below it
// (by "properties", "prefixItems" and "items") with a schema for which
// r.at holds. A schema already visited at the same place answers false:
// had it answered true, the search would be over.
func (r *reach) reaches(sch *jsonschema.Schema, toks []string, hops int) bool {
	if sch == nil || hops > maxDeclassifyDepth {
		return false
	}
	step := reachStep{sch, len(toks)}
	if r.seen[step] {
		return false
	}
	r.seen[step] = true
	if r.reaches(sch.Ref, toks, hops+1) {
		return true
	}
	members := [][]*jsonschema.Schema{sch.AllOf}
	if r.alternatives {
		members = append(members, sch.AnyOf, sch.OneOf)
	}
	for _, ms := range members {
		for _, s := range ms {
			if r.reaches(s, toks, hops+1) {
				return true
			}
		}
	}
	if len(toks) == 0 {
		return r.at(sch)
	}
	tok, rest := toks[0], toks[1:]
	if p, ok := sch.Properties[tok]; ok {
		return r.reaches(p, rest, hops+1)
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 {
		return false
	}
	if i < len(sch.PrefixItems) {
		return r.reaches(sch.PrefixItems[i], rest, hops+1)
	}
	if sch.Items2020 != nil {
		return r.reaches(sch.Items2020, rest, hops+1)
	}
	switch items := sch.Items.(type) {
	case *jsonschema.Schema:
		return r.reaches(items, rest, hops+1)
	case []*jsonschema.Schema:
		if i < len(items) {
			return r.reaches(items[i], rest, hops+1)
		}
	}
	return false
}

// constrained reports whether sch alone admits few values.
func constrained(sch *jsonschema.Schema) bool {
	if sch.Enum != nil || sch.Const != nil {
		return true
	}
	if sch.Types == nil {
		return false
	}
	switch types := sch.Types.ToStrings(); {
	case slices.Equal(types, []string{"boolean"}):
		return true
	case slices.Equal(types, []string{"integer"}):
		return (sch.Minimum != nil || sch.ExclusiveMinimum != nil) && (sch.Maximum != nil || sch.ExclusiveMaximum != nil)
	}
	return false
}
