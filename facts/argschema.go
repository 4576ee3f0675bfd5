package facts

import "github.com/policycheck/policycheck/facts/internal/jsonvalue"

// Schema is a registry's JSON Schema, compiled: a tool's
// parameters_json_schema or the registry's context_schema. Package
// loader compiles them as it reads a registry (loader.CompileSchema, the
// SchemaCompiler its registries are built with); this package holds them
// and calls them, and imports no JSON Schema library. A Schema is
// immutable and safe for concurrent use.
type Schema interface {
	// Validate validates a JSON value as ReadArgs reads one (objects as
	// map[string]any, arrays as []any, numbers as json.Number): nil when
	// it validates, else the problems, each with the JSON pointer inside
	// the value, at most MaxArgsProblems, sorted by pointer then reason,
	// without duplicates, and how many more there were. A value whose
	// validation would cost more than the compiler's bound is refused
	// with one problem saying so.
	Validate(v any) (probs []ArgsProblem, omitted int)
	// Requires reports whether the schema requires the top-level field:
	// its own "required" list names it. A requirement the schema only
	// states through allOf, $ref or a conditional is not seen.
	Requires(field string) bool
	// Forbids reports whether the schema refuses every value holding the
	// top-level field, whatever its value: the schema is false, or the
	// field's own property schema is false, or no property or pattern
	// property names it and additionalProperties is false. What the
	// schema only forbids through allOf, $ref or a conditional is not
	// seen.
	Forbids(field string) bool
	// Lists reports whether the schema's top level names the field: in
	// "properties", or by a "patternProperties" pattern that matches it.
	Lists(field string) bool
	// PropertyNames are the names the top-level "properties" lists,
	// sorted.
	PropertyNames() []string
	// Declassifies reports whether the schema constrains the value at
	// the JSON pointer ptr of the arguments to few values: an enum or a
	// const, a boolean, or an integer bounded below and above (the
	// schema reached by "properties", "prefixItems" and "items" from the
	// top, through $ref and allOf). A value so constrained carries
	// little an attacker can choose (input.call.args_integrity).
	Declassifies(ptr string) bool
	// Names reports whether the last token of the JSON pointer ptr, an
	// object key of the arguments, is a name the schema lists in the
	// "properties" of the value holding it (reached as Declassifies
	// reaches a value, through $ref and allOf): a key the operator
	// named, not one the model chose where "additionalProperties" or
	// "patternProperties" let it (input.call.args_integrity).
	Names(ptr string) bool
}

// SchemaCompiler compiles one JSON Schema of a registry: field names it,
// "parameters_json_schema" of the tool at index tool of the registry, or
// "context_schema" (tool is -1). ptr is the JSON pointer, inside the
// schema, of what is wrong, when known. loader.CompileSchema is the one
// the module uses.
type SchemaCompiler func(field string, tool int, raw []byte) (s Schema, ptr string, err error)

// ArgsSchema is a tool's parameters_json_schema (the field of
// pydantic-ai's ToolDefinition), or the registry's context_schema, as the
// registry holds it: the compiled Schema, validating arguments read by
// ReadArgs. It is immutable and safe for concurrent use.
type ArgsSchema struct{ s Schema }

// Requires reports whether the schema requires the top-level argument
// field (Schema.Requires).
func (a *ArgsSchema) Requires(field string) bool { return a.s.Requires(field) }

// Forbids reports whether the schema refuses every call whose arguments
// hold the top-level field (Schema.Forbids).
func (a *ArgsSchema) Forbids(field string) bool { return a.s.Forbids(field) }

// Lists reports whether the schema's top level names the field
// (Schema.Lists).
func (a *ArgsSchema) Lists(field string) bool { return a.s.Lists(field) }

// PropertyNames are the names the schema's top-level "properties" lists,
// sorted.
func (a *ArgsSchema) PropertyNames() []string { return a.s.PropertyNames() }

// Declassifies reports whether the schema constrains the argument value
// at the JSON pointer ptr to few values (Schema.Declassifies).
func (a *ArgsSchema) Declassifies(ptr string) bool { return a.s.Declassifies(ptr) }

// Names reports whether the object key at the end of the JSON pointer ptr
// is one the schema names in "properties" (Schema.Names).
func (a *ArgsSchema) Names(ptr string) bool { return a.s.Names(ptr) }

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

// ValidateArgs validates a call's raw arguments (the history's JSON: an
// object, a string holding JSON, or null) against the schema, as
// pydantic-ai validates a call before it runs the tool: a string is
// parsed as JSON (an empty one is {}), null or no arguments are {}. It
// returns nil when they validate, else the problems, at most
// MaxArgsProblems, in a stable order, and how many more there were.
func (a *ArgsSchema) ValidateArgs(raw []byte) (probs []ArgsProblem, omitted int) {
	return a.Validate(ReadArgs(raw))
}

// Validate validates arguments read by ReadArgs against the schema, as
// ValidateArgs does; a reading problem is the one problem.
func (a *ArgsSchema) Validate(args Args) (probs []ArgsProblem, omitted int) {
	switch {
	case args.Problem != nil:
		return []ArgsProblem{*args.Problem}, 0
	case args.notJSON != "":
		return []ArgsProblem{{Reason: args.notJSON}}, 0
	}
	return a.validate(args.validated)
}

// validate validates a value ReadArgs read, each problem's pointer and
// reason clipped to 160 bytes.
func (a *ArgsSchema) validate(v any) (probs []ArgsProblem, omitted int) {
	probs, omitted = a.s.Validate(v)
	for i := range probs {
		probs[i].Pointer, probs[i].Reason = jsonvalue.Clip(probs[i].Pointer), jsonvalue.Clip(probs[i].Reason)
	}
	return probs, omitted
}
