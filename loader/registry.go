package loader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
)

// registryDoc is the registry file format (docs/registry.md).
type registryDoc struct {
	Capabilities []struct {
		ID           string   `json:"id"`
		DeferLoading bool     `json:"defer_loading"`
		Description  string   `json:"description"`
		Labels       []string `json:"labels"`
		// RequiresApproval: every tool of the capability needs approval.
		RequiresApproval bool `json:"requires_approval"`
		facts.FlowLabels
	} `json:"capabilities"`
	Tools []struct {
		Name         string   `json:"name"`
		Capability   *string  `json:"capability"`
		DeferLoading bool     `json:"defer_loading"`
		Description  string   `json:"description"`
		MaxRetries   *int     `json:"max_retries"`
		Labels       []string `json:"labels"`
		// ParametersJSONSchema: compiled by CompileSchema (argschema.go).
		ParametersJSONSchema json.RawMessage `json:"parameters_json_schema"`
		// RequiresApproval: every call of the tool needs approval.
		RequiresApproval bool `json:"requires_approval"`
		// Upstream: the gateway's upstream MCP server (docs/gateway.md).
		Upstream string `json:"upstream"`
		facts.FlowLabels
	} `json:"tools"`
	// ContextSchema: compiled by CompileSchema (argschema.go).
	ContextSchema json.RawMessage `json:"context_schema"`
}

// ReadRegistry reads a registry file (YAML, or JSON by its .json
// extension) and validates it. See ParseRegistry.
func ReadRegistry(path string) (*facts.Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, IOError(path, err)
	}
	return ParseRegistry(path, data)
}

// ParseRegistry decodes and validates a registry document. JSON is
// recognised by a .json file name or a leading '{'; anything else is read
// as YAML. The document must match the shipped registry schema
// (loader/schema/registry.schema.json), then the rules that a schema cannot
// express: unique capability ids and tool names, known owners, reserved
// names. Every error is an *Error naming file and JSON pointer; several
// are joined with errors.Join.
func ParseRegistry(file string, data []byte) (*facts.Registry, error) {
	doc, err := decodeConfig(file, data)
	if err != nil {
		return nil, err
	}
	schemaErrs, err := registrySchemaErrors(file, doc)
	if err != nil {
		return nil, err
	}
	if len(schemaErrs) > 0 {
		// Report every mistake in one run: the schema's, and those of the
		// rules below on what can be read of the document.
		return nil, joinErrors(append(schemaErrs, lenientRegistryErrors(file, doc, schemaErrs)...))
	}
	// The schema has vetted every type: re-encode and decode into structs.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, &Error{File: file, Kind: KindSchema, Msg: err.Error()}
	}
	var rd registryDoc
	if err := json.Unmarshal(raw, &rd); err != nil {
		return nil, &Error{File: file, Kind: KindSchema, Msg: err.Error()}
	}
	caps := make([]facts.Capability, len(rd.Capabilities))
	for i, c := range rd.Capabilities {
		caps[i] = facts.Capability{ID: c.ID, DeferLoading: c.DeferLoading, Description: c.Description, Labels: c.Labels,
			RequiresApproval: c.RequiresApproval, FlowLabels: c.FlowLabels}
	}
	tools := make([]facts.Tool, len(rd.Tools))
	for i, t := range rd.Tools {
		tools[i] = facts.Tool{Name: t.Name, DeferLoading: t.DeferLoading, Description: t.Description, MaxRetries: t.MaxRetries,
			ParametersJSONSchema: t.ParametersJSONSchema, Labels: t.Labels, RequiresApproval: t.RequiresApproval,
			Upstream: t.Upstream, FlowLabels: t.FlowLabels}
		if t.Capability != nil {
			tools[i].Capability = *t.Capability
		}
	}
	reg, err := facts.NewRegistry(caps, tools, facts.WithContextSchema(rd.ContextSchema), facts.WithSchemaCompiler(CompileSchema))
	if err != nil {
		return nil, registryErrors(file, err)
	}
	return reg, nil
}

// lenientRegistryErrors runs the registry's own rules (unique ids and
// names, known owners, reserved names) on a document the schema refused,
// reading each entry's id, name and capability where they are strings, so
// that one run reports those mistakes too. Errors at, under or above a
// pointer the schema already reported are left out.
func lenientRegistryErrors(file string, doc any, schemaErrs []*Error) []*Error {
	top, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	str := func(m map[string]any, key string) string {
		v, _ := m[key].(string)
		return v
	}
	capList, _ := top["capabilities"].([]any)
	toolList, _ := top["tools"].([]any)
	caps := make([]facts.Capability, len(capList))
	for i, c := range capList {
		if m, ok := c.(map[string]any); ok {
			d, _ := m["defer_loading"].(bool)
			caps[i] = facts.Capability{ID: str(m, "id"), DeferLoading: d}
		}
	}
	tools := make([]facts.Tool, len(toolList))
	for i, t := range toolList {
		if m, ok := t.(map[string]any); ok {
			tools[i] = facts.Tool{Name: str(m, "name"), Capability: str(m, "capability")}
		}
	}
	_, err := facts.NewRegistry(caps, tools)
	if err == nil {
		return nil
	}
	var out []*Error
	for _, e := range flattenRegistryErrors(file, err) {
		related := false
		for _, se := range schemaErrs {
			if e.Pointer == se.Pointer || strings.HasPrefix(e.Pointer, se.Pointer+"/") || strings.HasPrefix(se.Pointer, e.Pointer+"/") {
				related = true
				break
			}
		}
		if !related {
			out = append(out, e)
		}
	}
	return out
}

// joinErrors returns the one error, or all of them (in document order)
// joined with errors.Join.
func joinErrors(errs []*Error) error {
	sortByPointer(errs)
	if len(errs) == 1 {
		return errs[0]
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

func registryErrors(file string, err error) error {
	out := flattenRegistryErrors(file, err)
	if len(out) == 1 {
		return out[0]
	}
	errs := make([]error, len(out))
	for i, e := range out {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// flattenRegistryErrors turns facts.NewRegistry's errors into *Errors of
// file.
func flattenRegistryErrors(file string, err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var re *facts.RegistryError
		if errors.As(e, &re) {
			out = append(out, &Error{File: file, Pointer: re.Pointer, Kind: KindSchema, Msg: re.Msg})
			return
		}
		out = append(out, &Error{File: file, Kind: KindSchema, Msg: e.Error()})
	}
	walk(err)
	return out
}

// decodeConfig decodes JSON or YAML into JSON-compatible values
// (map[string]any, []any, string, float64/json.Number, bool, nil).
func decodeConfig(file string, data []byte) (any, error) {
	trimmed := bytes.TrimSpace(data)
	if strings.EqualFold(filepath.Ext(file), ".json") || bytes.HasPrefix(trimmed, []byte("{")) {
		// Checked by the history's reader first: encoding/json would read
		// invalid UTF-8 or a lone surrogate escape as U+FFFD, as the YAML
		// reader does not.
		if _, err := wire.Skip(file, data, 0, DefaultMaxDepth); err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return nil, jsonSyntaxError(file, data, err)
		}
		if dec.More() {
			return nil, &Error{File: file, Kind: KindSyntax, Msg: "invalid JSON: unexpected data after the document"}
		}
		return doc, nil
	}
	var node yaml.Node
	if err := yaml.Unmarshal(data, &node); err != nil {
		return nil, &Error{File: file, Kind: KindSyntax, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if node.Kind == 0 {
		// An empty file, or one of comments only: a truncated or wrong
		// file far more often than a registry meant to hold nothing,
		// which is written {} (serve --watch would otherwise swap in an
		// empty registry while an editor rewrites the file).
		return nil, &Error{File: file, Kind: KindSchema, Msg: "the file holds no registry: an empty registry is written {}"}
	}
	budget := yamlMinValues + yamlValuesPerByte*len(data)
	return yamlValue(file, &node, "", 0, &budget)
}

// Bounds on the values a YAML document may expand to: aliases make a
// recursive document (`a: &x [*x]`) or an exponential one ("billion
// laughs") a few bytes long, and both must be an error, not a hang.
// Without aliases a document holds fewer values than bytes, so a budget
// proportional to its size never refuses one.
const (
	yamlMaxDepth      = 128
	yamlMinValues     = 1 << 16
	yamlValuesPerByte = 16
)

func jsonSyntaxError(file string, data []byte, err error) error {
	e := &Error{File: file, Kind: KindSyntax, Msg: "invalid JSON: " + err.Error()}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(se.Offset)
		e.Offset = off
		e.Line = 1 + bytes.Count(data[:min(off, len(data))], []byte{'\n'})
		e.Column = off - bytes.LastIndexByte(data[:min(off, len(data))], '\n')
	}
	return e
}

// yamlValue converts a YAML node to JSON-compatible values; mapping keys
// must be strings, and anchors/aliases are resolved within the depth and
// value budgets above.
func yamlValue(file string, n *yaml.Node, ptr string, depth int, budget *int) (any, error) {
	if depth > yamlMaxDepth {
		return nil, &Error{File: file, Pointer: ptr, Kind: KindLimit, Line: n.Line, Column: n.Column,
			Msg: fmt.Sprintf("nesting deeper than the limit of %d (a recursive alias?)", yamlMaxDepth)}
	}
	if *budget--; *budget < 0 {
		return nil, &Error{File: file, Pointer: ptr, Kind: KindLimit, Line: n.Line, Column: n.Column,
			Msg: "too many values once aliases are expanded (an alias bomb?)"}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return map[string]any{}, nil
		}
		return yamlValue(file, n.Content[0], ptr, depth, budget)
	case yaml.AliasNode:
		return yamlValue(file, n.Alias, ptr, depth, budget)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "") {
				return nil, &Error{File: file, Pointer: ptr, Kind: KindSchema, Line: k.Line, Column: k.Column,
					Msg: fmt.Sprintf("mapping keys must be strings, not %s", k.Tag)}
			}
			kptr := ptr + "/" + PointerToken(k.Value)
			if _, dup := m[k.Value]; dup {
				// YAML requires unique keys; the last one must not win silently.
				return nil, &Error{File: file, Pointer: kptr, Kind: KindSchema, Line: k.Line, Column: k.Column,
					Msg: fmt.Sprintf("duplicate key %q", k.Value)}
			}
			v, err := yamlValue(file, n.Content[i+1], kptr, depth+1, budget)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := yamlValue(file, c, fmt.Sprintf("%s/%d", ptr, i), depth+1, budget)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: err.Error(), Line: n.Line, Column: n.Column}
			}
			return b, nil
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: err.Error(), Line: n.Line, Column: n.Column}
			}
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return json.Number(strconv.FormatInt(int64(f), 10)), nil
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
		default:
			return n.Value, nil
		}
	}
	return nil, &Error{File: file, Pointer: ptr, Kind: KindSchema, Msg: "unsupported YAML node"}
}

// PointerToken escapes s as one reference token of a JSON pointer (RFC
// 6901): '~' becomes "~0" and '/' becomes "~1". The errors of this
// package name object keys so.
func PointerToken(s string) string { return wire.PointerToken(s) }
