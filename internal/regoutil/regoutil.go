// Package regoutil holds the small Rego helpers that the engine and the
// command line share: naming a filter package's capability and describing
// a Rego result's JSON type in messages.
package regoutil

import "github.com/open-policy-agent/opa/v1/ast"

// CapabilityOf returns the capability id of a filter package path
// (data.policycheck.capabilities.<id>, or ["<id>"] for ids that are not
// Rego identifiers), or "" for any other path.
func CapabilityOf(p ast.Ref) string {
	if len(p) != 4 || !p[0].Equal(ast.DefaultRootDocument) {
		return ""
	}
	if p[1].Value.Compare(ast.String("policycheck")) != 0 || p[2].Value.Compare(ast.String("capabilities")) != 0 {
		return ""
	}
	s, ok := p[3].Value.(ast.String)
	if !ok {
		return ""
	}
	return string(s)
}

// JSONKind names the JSON type of a value converted from a Rego result,
// with its article ("a string", "an array", "null"), for error messages.
func JSONKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}
