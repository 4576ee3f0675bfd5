// The input documents of docs/input.md are defined once, by the types
// of internal/contract (Input, FilterInput), whose doc comments its
// tables are generated from (go generate ./internal/contract). This test
// holds the engine to them in both directions: it builds input documents
// with the engine on the example registry and histories, lists every
// field path with its JSON type, and fails on a path the engine sends
// that the types lack, on a declared path the engine never sends, and on
// a type that does not match; a policy evaluated by the engine verifies
// that the fields declared as sets are sets (JSON cannot tell) and that
// the gate converts a JSON document's arrays at exactly those paths. The
// registry data table is generated here: `go test ./docs -update`
// rewrites it.
package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/contract"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

var update = flag.Bool("update", false, "rewrite the generated tables in docs/input.md")

type field struct {
	typ  string // "set of strings", "string", "string or null", …
	desc string
}

// decisionInput and filterInput are the input documents as
// internal/contract defines them (contract.Input, contract.FilterInput):
// their tables in input.md are generated from those types (go generate
// ./internal/contract); this test holds the engine to them.
var (
	decisionInput = declared(contract.InputPaths())
	filterInput   = declared(contract.FilterInputPaths())
)

func declared(ps []contract.Path) map[string]field {
	out := map[string]field{}
	for _, p := range ps {
		out[p.Path] = field{typ: p.Type}
	}
	return out
}

// registryData documents data.policycheck.registry.
var registryData = map[string]field{
	"tools":                  {"object", "Tool name -> `{name, capability, defer_loading, gate, description, labels}`, and `parameters_json_schema` when the registry gives the tool one; `gate` is `none`, `search` or `capability`; `labels` is the sorted array of the tool's labels and its capability's. When the registry sets any flow label (docs/registry.md, \"Integrity and confidentiality\"), every tool also carries its effective `integrity`, `confidentiality`, `clearance` (strings, defaults filled in) and `consequential` (boolean)."},
	"capabilities":           {"object", "Capability id -> `{id, defer_loading, description, labels}`; `labels` is a sorted array; with the capability's own `integrity`, `confidentiality`, `clearance` and `consequential` when it sets them."},
	"names":                  {"set of strings", "Every registry tool name."},
	"always_available":       {"set of strings", "Tools available without any reveal or load."},
	"search_gated":           {"set of strings", "Deferred tools a search reveals (no deferred owner)."},
	"deferred_capabilities":  {"set of strings", "Capabilities with `defer_loading: true`."},
	"always_on_capabilities": {"set of strings", "The other registered capabilities."},
	"capability_tools":       {"object", "Deferred capability id -> set of the tools it owns (what a load reveals)."},
	"owned_tools":            {"object", "Every registered capability id, deferred or always-on -> set of the tools it owns (for filters: `lib.registry_keep_own`)."},
	"requires_approval":      {"set of strings", "Present only when the registry marks a tool or a capability `requires_approval`: the tools whose calls need a person's approval (their own mark or their capability's); the gate asks for it (`approval_required`) until an approval is bound to the call."},
	"context_schema":         {"object", "Present only when the registry has one: its `context_schema`, the JSON Schema every request's `input.context` is validated against (a context that fails it is bad input)."},
}

// optionalRegistryData are the keys of registryData present only when the
// registry gives them.
const optionalRegistryData = `{"context_schema", "requires_approval"}`

// jsonType names the JSON type of a value as the tables do.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// compatible reports whether an observed JSON type fits a declared one.
func compatible(declared, observed string) bool {
	switch declared {
	case "any":
		return true
	case "set of strings":
		return observed == "array"
	case "string or null":
		return observed == "string" || observed == "null"
	case "string, number or null":
		return observed == "string" || observed == "number" || observed == "null"
	}
	return declared == observed
}

// mapPaths are the objects keyed by names (tool names): their values are
// documented once, at the path with ".*".
var mapPaths = func() map[string]bool {
	out := map[string]bool{}
	for _, p := range contract.InputPaths() {
		out[p.Path] = p.Map()
	}
	return out
}()

// walk records every path of v with the types seen. The context and call
// arguments are the operator's and the model's: not descended into.
func walk(prefix string, v any, seen map[string]map[string]bool, opaque map[string]bool) {
	add := func(p, t string) {
		if seen[p] == nil {
			seen[p] = map[string]bool{}
		}
		seen[p][t] = true
	}
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			if mapPaths[prefix] {
				p = prefix + ".*"
			}
			add(p, jsonType(sub))
			if !opaque[p] {
				walk(p, sub, seen, opaque)
			}
		}
	case []any:
		for _, el := range x {
			if m, ok := el.(map[string]any); ok {
				walk(prefix+"[]", m, seen, opaque)
			}
		}
	}
}

func table(fields map[string]field) string {
	paths := make([]string, 0, len(fields))
	for p := range fields {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString("| field | type | meaning |\n| --- | --- | --- |\n")
	for _, p := range paths {
		f := fields[p]
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", p, f.typ, f.desc)
	}
	return b.String()
}

// checkDeclared compares observed paths with the declared ones.
func checkDeclared(t *testing.T, what string, declared map[string]field, seen map[string]map[string]bool) {
	t.Helper()
	for p, types := range seen {
		f, ok := declared[p]
		if !assert.True(t, ok, "%s: the engine hands %s, which docs/input.md does not describe", what, p) {
			continue
		}
		for typ := range types {
			assert.True(t, compatible(f.typ, typ), "%s: %s is documented as %s but the engine sent %s", what, p, f.typ, typ)
		}
	}
	for p := range declared {
		assert.Contains(t, seen, p, "%s: docs/input.md describes %s, which the engine never sent", what, p)
	}
}

// setPaths returns, as Rego arrays of keys, the declared paths of sets
// (top-level or nested in objects, not inside arrays).
func setPaths(fields map[string]field, typ string) string {
	var out []string
	for p, f := range fields {
		if f.typ != typ || strings.Contains(p, "[]") {
			continue
		}
		keys, _ := json.Marshal(strings.Split(p, "."))
		out = append(out, string(keys))
	}
	sort.Strings(out)
	return "[" + strings.Join(out, ", ") + "]"
}

func keysOf(fields map[string]field) string {
	var out []string
	for p := range fields {
		if !strings.Contains(p, ".") && !strings.Contains(p, "[]") {
			b, _ := json.Marshal(p)
			out = append(out, string(b))
		}
	}
	sort.Strings(out)
	return "{" + strings.Join(out, ", ") + "}"
}

// keysBelow are the keys of the objects at path (an array's elements
// with "[]"), as a Rego set.
func keysBelow(fields map[string]field, path string) string {
	var out []string
	for p := range fields {
		if k, ok := strings.CutPrefix(p, path+"."); ok && !strings.ContainsAny(k, ".[") {
			b, _ := json.Marshal(k)
			out = append(out, string(b))
		}
	}
	sort.Strings(out)
	return "{" + strings.Join(out, ", ") + "}"
}

// probePolicies verify what JSON cannot show: the documented sets are
// sets, the arrays arrays, the filter input and registry data have
// exactly the documented keys, and the gate converts a JSON document's
// arrays at exactly the documented set paths. A broken claim hides
// get_time.
func probePolicies() []engine.Source {
	rules := fmt.Sprintf(`package policycheck.rules.docs_probe

hide contains "get_time" if {
	some p in %s
	v := object.get(input, p, set())
	not is_set(v)
}

hide contains "get_time" if {
	some p in %s
	v := object.get(input, p, [])
	not is_array(v)
}

hide contains "get_time" if object.keys(data.policycheck.registry) - %[4]s != %[3]s - %[4]s

hide contains "get_time" if {
	some p in %[5]s
	not is_set(object.get(data.policycheck.registry, p[0], set()))
}

hide contains "get_time" if {
	some ts in data.policycheck.registry.capability_tools
	not is_set(ts)
}

hide contains "get_time" if {
	some ts in data.policycheck.registry.owned_tools
	not is_set(ts)
}

hide contains "get_time" if {
	object.keys(data.policycheck.registry.owned_tools) != data.policycheck.registry.deferred_capabilities | data.policycheck.registry.always_on_capabilities
}

# The gate reads a JSON document's arrays as sets at exactly the
# documented set paths (policycheck.lib.gate.input_sets and .registry_sets).
hide contains "get_time" if {p | some p in data.policycheck.lib.gate._input_set_paths} != {p | some p in %s}

hide contains "get_time" if {p | some p in data.policycheck.lib.gate._registry_set_paths} != {p | some p in %s}
`, setPaths(decisionInput, "set of strings"), setPaths(decisionInput, "array"),
		keysOf(registryData), optionalRegistryData, setPaths(registryData, "set of strings"),
		setPaths(decisionInput, "set of strings"), setPaths(registryData, "set of strings"))
	filter := fmt.Sprintf(`package policycheck.capabilities.docs

prepare_tools := {t.name | some t in input.tools} if {
	object.keys(input) == %s
	every t in input.tools {
		object.keys(t) == %s
	}
	is_array(input.active_capabilities)
} else := set()
`, keysOf(filterInput), keysBelow(filterInput, "tools[]"))
	return []engine.Source{{File: "docs_probe.rego", Text: rules}, {File: "docs_filter.rego", Text: filter}}
}

func TestInputDocumentation(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(probePolicies()...))
	require.NoError(t, err)
	// A filter that fails fills the errors arrays (an array known only
	// at run time: the contract refuses one it can see at load).
	failing, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "refunds.rego",
		Text: "package policycheck.capabilities.refunds\n\nprepare_tools := json.unmarshal(`[\"get_time\"]`)\n"}))
	require.NoError(t, err)

	seen := map[string]map[string]bool{}
	// The context and the arguments are the operator's and the model's:
	// not descended into.
	opaque := map[string]bool{}
	for _, p := range contract.InputPaths() {
		opaque[p.Path] = p.Open()
	}
	for _, name := range []string{"refund", "after-compaction", "vault-rotate", "transfer", "exfiltration"} {
		raw, err := os.ReadFile("../examples/histories/" + name + ".json")
		require.NoError(t, err)
		h, err := loader.DecodeHistory(name, raw, loader.DefaultLimits())
		require.NoError(t, err)
		req := engine.Request{History: h, Context: map[string]any{"group": "support"}}
		// Through JSON, as `facts --format input` prints it.
		walkInput := func(e *engine.Engine, req engine.Request) {
			doc, err := e.Input(ctx, req)
			require.NoError(t, err)
			b, err := json.Marshal(doc)
			require.NoError(t, err)
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			var v any
			require.NoError(t, dec.Decode(&v))
			walk("", v, seen, opaque)
		}
		for _, e := range []*engine.Engine{eng, failing} {
			walkInput(e, req)
		}
		if name == "transfer" {
			// Approvals bound to both calls: one approved with override
			// arguments, one denied, so the approval fields are sent.
			calls := facts.Derive(h, reg).Dispatch.Calls
			req.Approvals = facts.Approvals{
				"t1": {Kind: facts.ToolApproved, Digest: trust.CallDigest(calls[0].ToolCallID, calls[0].Tool, calls[0].Args),
					Approvers: []string{"ana"}, OverrideArgs: []byte(`{"from": "ops", "to": "supplier", "amount": 1}`)},
				"t2": {Kind: facts.ToolDenied, Digest: trust.CallDigest(calls[1].ToolCallID, calls[1].Tool, calls[1].Args), Message: "no"},
			}
			walkInput(eng, req)
			// An override the registry's schema refuses: the call is
			// marked invalid_args.
			req.Approvals = facts.Approvals{"t1": {Kind: facts.ToolApproved,
				Digest:       trust.CallDigest(calls[0].ToolCallID, calls[0].Tool, calls[0].Args),
				OverrideArgs: []byte(`{"amount": "all"}`)}}
			walkInput(eng, req)
			req.Approvals = nil
		}
		d, err := eng.Decide(ctx, req)
		require.NoError(t, err)
		assert.Empty(t, d.Errors, name)
		assert.True(t, slices.Contains(d.Available, "get_time"),
			"%s: a documented set, array or key is not what the engine hands over (see probePolicies)", name)
	}
	// A registry with flow labels and a policy set that reads them: the
	// flow sources' labels, the window and args_integrity are sent.
	labelled, err := loader.ReadRegistry("../examples/integrity/registry.yaml")
	require.NoError(t, err)
	withLabels, err := engine.New(ctx, engine.Registry(labelled), engine.Modules(probePolicies()[0]),
		engine.PolicyPaths("../examples/policies/integrity"))
	require.NoError(t, err)
	// pay-bill: tool returns in the window; web-search: a provider-side
	// return (facts.builtin_returns, a builtin window source);
	// unpaired-return: a return without its call; tool-file: a prompt
	// part beside a tool return (a flow source's beside).
	for _, name := range []string{"pay-bill", "web-search", "unpaired-return", "tool-file"} {
		raw, err := os.ReadFile("../examples/integrity/histories/" + name + ".json")
		require.NoError(t, err)
		h, err := loader.DecodeHistory(name, raw, loader.DefaultLimits())
		require.NoError(t, err)
		doc, err := withLabels.Input(ctx, engine.Request{History: h})
		require.NoError(t, err)
		enc, err := json.Marshal(doc)
		require.NoError(t, err)
		dec := json.NewDecoder(bytes.NewReader(enc))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v))
		walk("", v, seen, opaque)
	}
	checkDeclared(t, "decision input", decisionInput, seen)

	generated := map[string]string{
		"registry-data": table(registryData),
	}
	const path = "input.md"
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(b)
	for name, tbl := range generated {
		begin := "<!-- BEGIN GENERATED " + name + " (go test ./docs -update) -->\n"
		end := "<!-- END GENERATED " + name + " -->"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		require.True(t, i >= 0 && j > i, "%s lacks the markers of %s", path, name)
		current := text[i+len(begin) : j]
		if *update {
			text = text[:i+len(begin)] + tbl + text[j:]
			continue
		}
		assert.Equal(t, tbl, current, "the %s table of %s is stale: run go test ./docs -update", name, path)
	}
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
}
