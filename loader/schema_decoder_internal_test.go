package loader

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// The decoder is the definition of the history format; the published
// JSON Schema (schema/history.schema.json) is checked against it here,
// structurally: the keys the decoder reads are the keys the schema
// names, message by message and part by part, and each of them accepts
// the same JSON types in both. The agreement tests (agreement_test.go,
// FuzzHistorySchemaAgreement) check whole documents, both ways.

// schemaDefs returns the history schema's $defs.
func schemaDefs(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(HistorySchema(), &doc))
	defs, ok := doc["$defs"].(map[string]any)
	require.True(t, ok, "the history schema has no $defs")
	return defs
}

// schemaProps adds to out the names of the properties the schema node
// constrains, following $ref, allOf, anyOf, oneOf, if, then and else, but
// not descending into the properties' own values or an array's items.
func schemaProps(defs map[string]any, node any, out map[string]bool) {
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		schemaProps(defs, defs[strings.TrimPrefix(ref, "#/$defs/")], out)
	}
	props, _ := m["properties"].(map[string]any)
	for name := range props {
		out[name] = true
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, _ := m[k].([]any)
		for _, sub := range list {
			schemaProps(defs, sub, out)
		}
	}
	for _, k := range []string{"if", "then", "else"} {
		schemaProps(defs, m[k], out)
	}
}

// propsOf is schemaProps of the named $defs.
func propsOf(defs map[string]any, names ...string) []string {
	out := map[string]bool{}
	for _, n := range names {
		schemaProps(defs, defs[n], out)
	}
	return slices.Sorted(maps.Keys(out))
}

// TestDecoderKeysAreTheSchemas: every message and part key the decoder
// reads is a property of the schema, and every property of a message or a
// part in the schema is a key the decoder reads. A key on one side only is
// a history one validator judges and the other does not look at.
func TestDecoderKeysAreTheSchemas(t *testing.T) {
	for i, name := range messageKeyNames {
		k, ok := messageKey([]byte(name))
		require.True(t, ok && k == i, "messageKey(%q) = %d, %v; messageKeyNames holds it at %d", name, k, ok, i)
	}
	for i, name := range partKeyNames {
		k, ok := partKey([]byte(name))
		require.True(t, ok && k == i, "partKey(%q) = %d, %v; partKeyNames holds it at %d", name, k, ok, i)
	}
	defs := schemaDefs(t)
	msgKeys := slices.Sorted(slices.Values(messageKeyNames[:]))
	require.Equal(t, msgKeys, propsOf(defs, "message", "request", "response"),
		"the message keys the decoder reads (messageKeyNames), and the schema's")
	partKeys := slices.Sorted(slices.Values(partKeyNames[:]))
	var partDefs []string
	for name := range defs {
		if strings.HasSuffix(name, "Part") || strings.HasSuffix(name, "Base") {
			partDefs = append(partDefs, name)
		}
	}
	sort.Strings(partDefs)
	require.Equal(t, partKeys, propsOf(defs, partDefs...),
		"the part keys the decoder reads (partKeyNames), and the schema's (%s)", strings.Join(partDefs, ", "))
}

// minimalParts are the smallest valid part of each kind, and the kind of
// message it goes in.
var minimalParts = map[facts.PartKind]struct {
	message string
	part    string
}{
	facts.SystemPrompt:          {"request", `{"part_kind": "system-prompt", "content": "s"}`},
	facts.UserPrompt:            {"request", `{"part_kind": "user-prompt", "content": "u"}`},
	facts.ToolReturn:            {"request", `{"part_kind": "tool-return", "tool_name": "t", "content": "r"}`},
	facts.RetryPrompt:           {"request", `{"part_kind": "retry-prompt", "content": "r"}`},
	facts.ToolAvailabilityDelta: {"request", `{"part_kind": "tool-availability-delta"}`},
	facts.Speech:                {"request", `{"part_kind": "speech"}`},
	facts.Text:                  {"response", `{"part_kind": "text", "content": "t"}`},
	facts.Thinking:              {"response", `{"part_kind": "thinking", "content": "t"}`},
	facts.Compaction:            {"response", `{"part_kind": "compaction"}`},
	facts.File:                  {"response", `{"part_kind": "file"}`},
	facts.ToolCall:              {"response", `{"part_kind": "tool-call", "tool_name": "t"}`},
	facts.BuiltinToolCall:       {"response", `{"part_kind": "builtin-tool-call", "tool_name": "b"}`},
	facts.BuiltinToolReturn:     {"response", `{"part_kind": "builtin-tool-return", "tool_name": "b", "content": "r"}`},
}

// typeSamples are a value of each JSON type.
var typeSamples = []struct {
	t   jtype
	raw any
}{{tString, "x"}, {tNumber, json.Number("1")}, {tObject, map[string]any{}}, {tArray, []any{}}, {tBool, true}, {tNull, nil}}

// schemaAndDecoder reports whether the schema and the decoder accept the
// history doc.
func schemaAndDecoder(t *testing.T, doc any) (schemaOK, decoderOK bool, data []byte) {
	t.Helper()
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err)
	_, decErr := DecodeHistory("h.json", data, DefaultLimits())
	return ValidateHistorySchema("h.json", v) == nil, decErr == nil, data
}

// parse reads a JSON object with numbers kept as written.
func parse(t *testing.T, s string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

// TestDecoderTypesAreTheSchemas sets each key the decoder reads, in each
// kind of message and of part, to a value of each JSON type, in an
// otherwise minimal valid history, and requires the schema and the
// decoder to agree on every one of them; where the decoder checks the
// key's type by a table (requestRules, responseRules, plainRules), the
// types both accept are the table's.
func TestDecoderTypesAreTheSchemas(t *testing.T) {
	for k := range plainRules {
		_, ok := minimalParts[k]
		require.True(t, ok, "minimalParts has no %s part", k)
	}
	var checked int
	try := func(what string, doc any, set func(any), want jtype, table bool) {
		t.Helper()
		for _, s := range typeSamples {
			set(s.raw)
			schemaOK, decoderOK, data := schemaAndDecoder(t, doc)
			checked++
			require.Equal(t, schemaOK, decoderOK, "%s as %s: the schema accepts: %v, the decoder: %v\n%s", what, s.t, schemaOK, decoderOK, data)
			if table {
				require.Equal(t, want&s.t != 0, decoderOK, "%s as %s: the decoder's table allows %s\n%s", what, s.t, want, data)
			}
		}
	}
	rules := map[string][]keyRule{"request": requestRules, "response": responseRules}
	for _, mk := range []string{"request", "response"} {
		part := minimalParts[facts.UserPrompt].part
		if mk == "response" {
			part = minimalParts[facts.Text].part
		}
		for i, name := range messageKeyNames {
			msg := parse(t, `{"kind": "`+mk+`", "parts": [`+part+`]}`)
			var want jtype
			table := false
			for _, r := range rules[mk] {
				if r.key == i {
					want, table = r.types, true
				}
			}
			orig, had := msg[name]
			try(fmt.Sprintf("%s message's %s", mk, name), []any{msg}, func(v any) { msg[name] = v }, want, table)
			if had {
				msg[name] = orig
			}
		}
	}
	for kind, min := range minimalParts {
		for i, name := range partKeyNames {
			part := parse(t, min.part)
			msg := map[string]any{"kind": min.message, "parts": []any{part}}
			var want jtype
			table := false
			for _, r := range plainRules[kind] {
				if r.key == i {
					want, table = r.types, true
				}
			}
			try(fmt.Sprintf("%s part's %s", kind, name), []any{msg}, func(v any) { part[name] = v }, want, table)
		}
	}
	t.Logf("%d histories judged by both", checked)
}
