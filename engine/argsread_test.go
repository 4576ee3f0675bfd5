package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// readRegistry: transfer_funds has examples/registry.yaml's schema, with
// other properties allowed; issue_refund has the shipped schema's
// exclusiveMinimum; get_time has no schema.
const readRegistry = `{"tools": [
	{"name": "transfer_funds", "parameters_json_schema": {"type": "object",
		"properties": {"from": {"type": "string"}, "to": {"type": "string"}, "amount": {"type": "number"}},
		"required": ["from", "to", "amount"]}},
	{"name": "issue_refund", "parameters_json_schema": {"type": "object",
		"properties": {"order_id": {"type": "integer"}, "amount": {"type": "number", "exclusiveMinimum": 0}},
		"required": ["order_id", "amount"], "additionalProperties": false}},
	{"name": "get_time"}
]}`

// readRules deny what examples/policies/transfers denies (an amount above
// the hard limit), and deny get_time when its arguments say so.
var readRules = engine.Source{File: "read.rego", Text: `package policycheck.rules.read

deny contains "transfer above the hard limit" if {
	input.call.tool == "transfer_funds"
	input.call.args.amount > 50000
}

deny contains "get_time told to refuse" if {
	input.call.tool == "get_time"
	input.call.args.deny == true
}
`}

// TestArgsReadOnceOrRefused (issue 43, items 1, 2 and 9): arguments the
// engine cannot read exactly one way are invalid_args, with the pointer
// and the reason, for tools with and without a schema: a number OPA
// refuses, a number the schema validator cannot compare, a key given
// twice, string arguments with data after their JSON, and string
// arguments nested past the limit. Before the fix each of these executed
// (or panicked): the rules read input.call.args as null, or the last of
// two keys.
func TestArgsReadOnceOrRefused(t *testing.T) {
	reg := mustRegistry(t, readRegistry)
	e := mustEngine(t, reg, engine.Modules(readRules))
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	for _, tc := range []struct {
		note, tool, args string
		pointer, reason  string // of the one problem
	}{
		{note: "a number OPA refuses", tool: "transfer_funds", args: `{"from": "ops", "to": "x", "amount": 1e50000}`,
			pointer: "/amount", reason: "the number 1e50000 is out of range"},
		{note: "a padding number next to a large amount", tool: "transfer_funds", args: `{"from": "ops", "to": "x", "amount": 999999, "note": 1e50000}`,
			pointer: "/note", reason: "out of range"},
		{note: "a padding number without a schema", tool: "get_time", args: `{"deny": true, "note": 1e50000}`,
			pointer: "/note", reason: "out of range"},
		{note: "a tiny number", tool: "get_time", args: `{"deny": true, "note": 1e-50000}`,
			pointer: "/note", reason: "out of range"},
		{note: "a long number", tool: "get_time", args: `{"deny": true, "note": 1` + strings.Repeat("0", 500) + `}`,
			pointer: "/note", reason: "out of range"},
		{note: "an exponent the validator cannot compare", tool: "issue_refund", args: `{"order_id": 7, "amount": 1e10000000}`,
			pointer: "/amount", reason: "out of range"},
		{note: "a negative exponent the validator cannot compare", tool: "issue_refund", args: `{"order_id": 7, "amount": 1e-10000000}`,
			pointer: "/amount", reason: "out of range"},
		{note: "a key twice", tool: "transfer_funds", args: `{"from": "ops", "to": "x", "amount": 1000000000, "amount": 250}`,
			pointer: "/amount", reason: `the key "amount" appears more than once`},
		{note: "a key twice without a schema", tool: "get_time", args: `{"deny": true, "deny": false}`,
			pointer: "/deny", reason: "appears more than once"},
		{note: "a key twice, nested", tool: "get_time", args: `{"deny": true, "x": [{"a": 1, "a": 2}]}`,
			pointer: "/x/0/a", reason: "appears more than once"},
		{note: "a key twice in string arguments", tool: "get_time", args: `"{\"deny\": true, \"deny\": false}"`,
			pointer: "/deny", reason: "appears more than once"},
		{note: "string arguments with data after their JSON", tool: "get_time", args: `"{\"deny\": true}xyz"`,
			reason: "followed by other data"},
		{note: "string arguments with a NUL byte and data after their JSON", tool: "get_time", args: `"{\"deny\": true}\u0000xyz"`,
			reason: "followed by other data"},
		{note: "string arguments with data after their JSON, with a schema", tool: "issue_refund", args: `"{\"order_id\": 7, \"amount\": 5}xyz"`,
			reason: "followed by other data"},
		{note: "a huge number in string arguments", tool: "get_time", args: `"{\"deny\": true, \"n\": 1e50000}"`,
			pointer: "/n", reason: "out of range"},
		{note: "string arguments nested past the limit", tool: "get_time", args: `"{\"deny\": true, \"n\": ` + deep + `}"`,
			reason: "nesting deeper than the limit of 200"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			h := mustHistory(t, wReq(wUser("go")), wResp("", wCall(tc.tool, "c1", tc.args)))
			d := mustDecide(t, e, h, nil)
			require.Len(t, d.Calls, 1)
			c := d.Calls[0]
			require.Equal(t, engine.InvalidArgs, c.Verdict, "%+v", c)
			require.Len(t, c.ArgsErrors, 1, "%+v", c.ArgsErrors)
			if tc.pointer != "" {
				assert.Equal(t, tc.pointer, c.ArgsErrors[0].Pointer)
			}
			assert.Contains(t, c.ArgsErrors[0].Reason, tc.reason)
			assert.Contains(t, c.Message, "1 validation error in the arguments: ")
			assert.NotContains(t, strings.Join(c.Reasons, " "), "parameters_json_schema", "a reading problem is not the schema's")
		})
	}
}

// TestArgsReadOrdinary: ordinary arguments still reach the rules as they
// are, in both forms, at the bounds of what is read.
func TestArgsReadOrdinary(t *testing.T) {
	reg := mustRegistry(t, readRegistry)
	e := mustEngine(t, reg, engine.Modules(readRules))
	for _, tc := range []struct{ note, tool, args, verdict string }{
		{"a large amount is denied", "transfer_funds", `{"from": "ops", "to": "x", "amount": 999999}`, engine.Denied},
		{"a large amount spelt with an exponent", "transfer_funds", `{"from": "ops", "to": "x", "amount": 1e400}`, engine.Denied},
		{"a small amount", "transfer_funds", `{"from": "ops", "to": "x", "amount": 250.5e-2}`, engine.Execute},
		{"string arguments", "get_time", `"{\"deny\": true}"`, engine.Denied},
		{"string arguments with spaces around", "get_time", `" {\"deny\": true} "`, engine.Denied},
		{"string arguments that are not JSON", "get_time", `"now please"`, engine.Execute},
		{"no arguments", "get_time", `null`, engine.Execute},
		{"the same key in two objects", "get_time", `{"deny": true, "x": {"deny": false}}`, engine.Denied},
	} {
		t.Run(tc.note, func(t *testing.T) {
			h := mustHistory(t, wReq(wUser("go")), wResp("", wCall(tc.tool, "c1", tc.args)))
			d := mustDecide(t, e, h, nil)
			require.Len(t, d.Calls, 1)
			assert.Equal(t, tc.verdict, d.Calls[0].Verdict, "%+v", d.Calls[0])
		})
	}
}

// TestArgsReadInputNeverNull: the input of a call that goes on to be
// decided carries its arguments; an unreadable call carries invalid_args.
func TestArgsReadInputNeverNull(t *testing.T) {
	reg := mustRegistry(t, readRegistry)
	e := mustEngine(t, reg, engine.Modules(readRules))
	h := mustHistory(t, wReq(wUser("go")), wResp("",
		wCall("get_time", "c1", `{"note": 1e50000}`),
		wCall("get_time", "c2", `{"note": 1e300}`)))
	in, err := e.Input(context.Background(), engine.Request{History: h})
	require.NoError(t, err)
	calls := in.(map[string]any)["dispatch"].(map[string]any)["calls"].([]any)
	first, second := calls[0].(map[string]any), calls[1].(map[string]any)
	assert.Equal(t, true, first["invalid_args"])
	assert.NotNil(t, second["args"])
	_, marked := second["invalid_args"]
	assert.False(t, marked)
}

// TestArgsValidationWorkBounded (issue 43, item 3): a recursive schema
// that branches at every level loads (its expansion counts the recursion
// once), but the validator's work grows as 2^depth of the value: 20
// levels are a million subschema visits (seconds and hundreds of MB
// before the bound; 40 would never end). The call is invalid_args with
// the bound's reason, without validating.
func TestArgsValidationWorkBounded(t *testing.T) {
	reg := mustRegistry(t, `{"tools": [{"name": "tree", "parameters_json_schema": {"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "anyOf": [
		{"properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["c"]},
		{"properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["c"]}]}}}}]}`)
	e := mustEngine(t, reg)
	nested := func(depth int) string {
		return strings.Repeat(`{"c": `, depth) + "5" + strings.Repeat("}", depth)
	}
	h := mustHistory(t, wReq(wUser("go")), wResp("", wCall("tree", "c1", nested(20))))
	d := mustDecide(t, e, h, nil)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.InvalidArgs, d.Calls[0].Verdict)
	require.Len(t, d.Calls[0].ArgsErrors, 1)
	assert.Contains(t, d.Calls[0].ArgsErrors[0].Reason, "validating these arguments against the tool's schema would take more than")

	// Shallow, the same schema validates as before.
	h = mustHistory(t, wReq(wUser("go")), wResp("", wCall("tree", "c1", nested(3))))
	d = mustDecide(t, e, h, nil)
	assert.Contains(t, d.Calls[0].Message, "want object")
	// A recursion that does not branch costs a visit per level: deep
	// arguments are validated.
	reg = mustRegistry(t, `{"tools": [{"name": "tree", "parameters_json_schema": {"$ref": "#/$defs/n", "$defs": {"n": {"type": "object",
		"properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["c"]}}}}]}`)
	e = mustEngine(t, reg)
	h = mustHistory(t, wReq(wUser("go")), wResp("", wCall("tree", "c1", nested(150))))
	d = mustDecide(t, e, h, nil)
	assert.Contains(t, d.Calls[0].Message, "want object")
}
