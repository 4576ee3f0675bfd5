package loader_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

const transferSchema = `{"type": "object",
	"properties": {"from": {"type": "string", "minLength": 1}, "to": {"type": "string", "minLength": 1}, "amount": {"type": "number"}},
	"required": ["from", "to", "amount"], "additionalProperties": false}`

func schemaRegistry(t testing.TB, schema string) (*facts.Registry, error) {
	t.Helper()
	return facts.NewRegistry(nil, []facts.Tool{{Name: "get_time"}, {Name: "transfer_funds", ParametersJSONSchema: json.RawMessage(schema)}},
		facts.WithSchemaCompiler(loader.CompileSchema))
}

// TestArgsSchemaCompile: a schema that does not compile, is not an
// object, or refers to another document is refused with the pointer of
// the tool's schema (and into it, when known).
func TestArgsSchemaCompile(t *testing.T) {
	for _, tc := range []struct{ schema, err string }{
		{`{"type": 5}`, "/tools/1/parameters_json_schema/type: parameters_json_schema is not a valid JSON Schema"},
		{`true`, "/tools/1/parameters_json_schema: parameters_json_schema must be a JSON Schema object"},
		{`{"$ref": "file:///etc/passwd"}`, "must be self-contained"},
		{`{"$ref": "https://example.com/s.json"}`, "must be self-contained"},
		{`{"type": "string", "pattern": "(?<=a)b"}`, "/tools/1/parameters_json_schema"},
	} {
		_, err := schemaRegistry(t, tc.schema)
		require.Error(t, err, tc.schema)
		assert.Contains(t, err.Error(), tc.err, tc.schema)
	}
	reg, err := schemaRegistry(t, transferSchema)
	require.NoError(t, err)
	assert.Nil(t, reg.ArgsSchema("get_time"))
	assert.Nil(t, reg.ArgsSchema("nope"))
	sch := reg.ArgsSchema("transfer_funds")
	require.NotNil(t, sch)
	assert.True(t, sch.Requires("amount"))
	assert.False(t, sch.Requires("memo"))
	assert.True(t, reg.HasArgsSchemas())
}

// TestValidateArgsBounds: at most MaxArgsProblems problems, the rest
// counted; reasons and pointers clipped.
func TestValidateArgsBounds(t *testing.T) {
	reg, err := schemaRegistry(t, `{"type": "object", "additionalProperties": {"type": "integer"}}`)
	require.NoError(t, err)
	var fields []string
	for i := range 9 {
		fields = append(fields, `"`+strings.Repeat("k", 300)+string(rune('a'+i))+`": "x"`)
	}
	probs, omitted := reg.ArgsSchema("transfer_funds").ValidateArgs([]byte("{" + strings.Join(fields, ",") + "}"))
	assert.Len(t, probs, facts.MaxArgsProblems)
	assert.Equal(t, 9-facts.MaxArgsProblems, omitted)
	for _, p := range probs {
		assert.LessOrEqual(t, len(p.Pointer), 160)
		assert.LessOrEqual(t, len(p.Reason), 160)
	}
}

// BenchmarkValidateArgs: one call's arguments validated against the
// example registry's transfer schema (the per-call cost the engine adds
// for a tool with a schema), as an object and as a JSON string.
func BenchmarkValidateArgs(b *testing.B) {
	reg, err := schemaRegistry(b, transferSchema)
	if err != nil {
		b.Fatal(err)
	}
	sch := reg.ArgsSchema("transfer_funds")
	for _, c := range []struct{ name, args string }{
		{"object", `{"from": "ops", "to": "savings", "amount": 5000}`},
		{"string", `"{\"from\": \"ops\", \"to\": \"savings\", \"amount\": 5000}"`},
		{"invalid", `{"amount": "5000"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			raw := []byte(c.args)
			b.ReportAllocs()
			for b.Loop() {
				sch.ValidateArgs(raw)
			}
		})
	}
}

// expandingSchema is issue 43's item 3: $defs a0..a{n} where each a_i is
// anyOf two $refs to a_{i+1}, so validating against a0 visits 2^n
// subschemas (13.6 s and 3.9 GB at n = 22 before the limit).
func expandingSchema(n int) string {
	var b strings.Builder
	b.WriteString(`{"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": {`)
	for i := range n {
		fmt.Fprintf(&b, `"a%d": {"anyOf": [{"$ref": "#/$defs/a%d"}, {"$ref": "#/$defs/a%d"}]}, `, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"a%d": {"type": "string"}}}`, n)
	return b.String()
}

// TestArgsSchemaExpansionLimit (issue 43, item 3): a schema whose
// subschemas, with every $ref followed, pass loader.MaxArgsSchemaExpansion
// is refused at load, naming the tool's schema and the subschema where the
// expansion passes the limit; one just under the limit loads.
func TestArgsSchemaExpansionLimit(t *testing.T) {
	_, err := schemaRegistry(t, expandingSchema(22))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/tools/1/parameters_json_schema/$defs/a")
	assert.Contains(t, err.Error(), fmt.Sprintf("more than %d subschemas", loader.MaxArgsSchemaExpansion))

	_, err = schemaRegistry(t, expandingSchema(10)) // about 4,000 subschemas
	require.NoError(t, err)
}

// TestSchemaNeedsCompiler: package facts compiles no JSON Schema; a
// registry with a schema and no compiler (or a compiler that returns no
// schema) is refused, naming the schema, never built as if the schema
// were not there.
func TestSchemaNeedsCompiler(t *testing.T) {
	_, err := facts.NewRegistry(nil, []facts.Tool{{Name: "transfer_funds", ParametersJSONSchema: json.RawMessage(transferSchema)}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/tools/0/parameters_json_schema: parameters_json_schema needs a schema compiler")
	_, err = facts.NewRegistry(nil, nil, facts.WithContextSchema(json.RawMessage(`{"type": "object"}`)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/context_schema: context_schema needs a schema compiler")
	none := func(string, int, []byte) (facts.Schema, string, error) { return nil, "", nil }
	_, err = facts.NewRegistry(nil, []facts.Tool{{Name: "t", ParametersJSONSchema: json.RawMessage(`{}`)}}, facts.WithSchemaCompiler(none))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the schema compiler returned no schema")
}

// TestRegistryFlowLabels: the registry's integrity, confidentiality,
// clearance and consequential fields are read, inherited from the
// capability, and an unknown value is refused at its pointer.
func TestRegistryFlowLabels(t *testing.T) {
	reg, err := loader.ParseRegistry("r.yaml", []byte(`capabilities:
  - id: mail
    integrity: untrusted
    confidentiality: confidential
tools:
  - name: read_mail
    capability: mail
    integrity: trusted
  - name: send_money
    clearance: public
    consequential: true
`))
	require.NoError(t, err)
	require.Equal(t, facts.FlowLabels{Integrity: "untrusted", Confidentiality: "confidential", Clearance: "internal"}, reg.LabelsOf("read_mail"))
	require.Equal(t, facts.FlowLabels{Integrity: "untrusted", Confidentiality: "internal", Clearance: "public", Consequential: true}, reg.LabelsOf("send_money"))
	for note, tc := range map[string]struct{ doc, ptr string }{
		"tool integrity":       {"tools:\n  - name: a\n    integrity: high\n", "/tools/0/integrity"},
		"tool clearance":       {"tools:\n  - name: a\n    clearance: top-secret\n", "/tools/0/clearance"},
		"capability confident": {"capabilities:\n  - id: c\n    confidentiality: private\n", "/capabilities/0/confidentiality"},
		"consequential string": {"tools:\n  - name: a\n    consequential: \"yes\"\n", "/tools/0/consequential"},
	} {
		_, err := loader.ParseRegistry("r.yaml", []byte(tc.doc))
		require.Error(t, err, note)
		var le *loader.Error
		require.ErrorAs(t, err, &le, note)
		require.Equal(t, tc.ptr, le.Pointer, note)
	}
}

// TestSchemaDeclassifies: a value the tool's schema constrains to an
// enum, a const, a boolean or an integer bounded on both sides is
// declassified, through properties, items, $ref and allOf; a free
// string, a half-bounded integer, a number and an unknown pointer are
// not.
func TestSchemaDeclassifies(t *testing.T) {
	reg, err := loader.ParseRegistry("r.yaml", []byte(`tools:
  - name: t
    parameters_json_schema:
      type: object
      $defs:
        currency: {enum: [EUR, USD]}
      properties:
        to: {type: string}
        currency: {$ref: "#/$defs/currency"}
        urgent: {type: boolean}
        kind: {const: transfer}
        count: {type: integer, minimum: 1, maximum: 10}
        over: {type: integer, minimum: 1}
        amount: {type: number, minimum: 0, maximum: 100}
        tags: {type: array, items: {enum: [a, b]}}
        pair: {type: array, prefixItems: [{type: boolean}, {type: string}]}
        both: {allOf: [{type: string}, {enum: [x, y]}]}
        "a/b": {type: boolean}
`))
	require.NoError(t, err)
	sch := reg.ArgsSchema("t")
	for ptr, want := range map[string]bool{
		"/to": false, "/currency": true, "/urgent": true, "/kind": true, "/count": true, "/over": false,
		"/amount": false, "/tags/3": true, "/pair/0": true, "/pair/1": false, "/both": true, "/a~1b": true,
		"/nope": false, "": false, "to": false,
	} {
		require.Equal(t, want, sch.Declassifies(ptr), ptr)
	}
}

// TestSchemaNames: an object key is named when the schema of the value
// holding it lists it in "properties" (through $ref, allOf, items); a
// key only additionalProperties or patternProperties admits, one under
// such a key, and the empty pointer are not.
func TestSchemaNames(t *testing.T) {
	reg, err := loader.ParseRegistry("r.yaml", []byte(`tools:
  - name: t
    parameters_json_schema:
      type: object
      $defs:
        payee: {type: object, properties: {iban: {type: string}}}
      properties:
        to: {type: string}
        payee: {$ref: "#/$defs/payee"}
        payees: {type: array, items: {$ref: "#/$defs/payee"}}
        flags: {type: object, additionalProperties: {type: boolean}}
        both: {allOf: [{properties: {x: {}}}]}
        maybe: {anyOf: [{$ref: "#/$defs/payee"}, {type: "null"}]}
        "a/b": {type: object, patternProperties: {"^k": {type: string}}}
      additionalProperties: {type: object, properties: {inner: {}}}
`))
	require.NoError(t, err)
	sch := reg.ArgsSchema("t")
	for ptr, want := range map[string]bool{
		"/to": true, "/payee": true, "/payee/iban": true, "/payees/0/iban": true, "/payees/0/other": false,
		"/flags": true, "/flags/GB33BUKB20201555555555": false, "/both/x": true, "/both/y": false,
		"/a~1b": true, "/a~1b/k1": false, "/free": false, "/free/inner": false, "": false, "to": false,
		"/maybe": true, "/maybe/iban": true, "/maybe/other": false,
	} {
		require.Equal(t, want, sch.Names(ptr), ptr)
	}
}

// TestSchemaLabelsSearchIsBounded: a schema whose allOf refers back to
// itself twice loads, and asking it what a pointer is declassified by or
// named in visits each of its schemas once per place: it answers at
// once (it searched 2^64 paths and never answered). Seen failing on
// c30cdcd: Declassifies("/a/b/c") ran for more than 5s.
func TestSchemaLabelsSearchIsBounded(t *testing.T) {
	reg, err := loader.ParseRegistry("r.yaml", []byte(`tools:
  - name: t
    parameters_json_schema: {"type": "object", "allOf": [{"$ref": "#"}, {"$ref": "#"}], "anyOf": [{"$ref": "#"}, {"$ref": "#"}], "properties": {"a": {"type": "string"}}}
`))
	require.NoError(t, err)
	sch := reg.ArgsSchema("t")
	done := make(chan [3]bool, 1)
	go func() {
		done <- [3]bool{sch.Declassifies("/a/b/c/d/e/f"), sch.Names("/a/b/c/d/e/f"), sch.Names("/a")}
	}()
	select {
	case got := <-done:
		require.Equal(t, [3]bool{false, false, true}, got)
	case <-time.After(5 * time.Second):
		t.Fatal("Declassifies and Names did not answer within 5s")
	}
}
