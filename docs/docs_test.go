// The field tables of docs/input.md are generated from what the engine
// actually hands to Rego, not copied by hand: this test builds input
// documents with the engine on the example registry and histories, lists
// every field path with its JSON type, checks each path against the
// declared description (a path without one, or a description without a
// path, fails), verifies through a policy evaluated by the engine that
// the fields documented as sets are sets (JSON cannot tell), and compares
// the tables with the committed ones. `go test ./docs -update` rewrites
// them.
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
)

var update = flag.Bool("update", false, "rewrite the generated tables in docs/input.md")

type field struct {
	typ  string // "set of strings", "string", "string or null", …
	desc string
}

// decisionInput documents input for the decision and for operator rules.
// Paths use [] for "each element of the array".
var decisionInput = map[string]field{
	"context":                                      {"object", "The request context (`--context`, the API's `context`): whatever the operator sends; `{}` when none."},
	"facts":                                        {"object", "What the model was shown, over the conservative post-compaction window of the whole history."},
	"facts.window":                                 {"object", "Start of the post-compaction window: the first message and part the facts read."},
	"facts.window.message":                         {"number", "Message index."},
	"facts.window.part":                            {"number", "Part index within that message."},
	"facts.discovered":                             {"set of strings", "Tool names revealed in the window: by searches (typed, native or legacy search returns) and by `tool-availability-delta` parts, such as the delta a capability load writes with the tools it adds (raw: may name tools that do not exist)."},
	"facts.loaded":                                 {"set of strings", "Capability ids loaded in the window (raw: may name unregistered ids)."},
	"facts.returned":                               {"set of strings", "Tools with a successful `tool-return` in the window: the input of sequence rules."},
	"facts.active_capabilities":                    {"set of strings", "Always-on capabilities plus the loaded deferred ones: the next request's active set."},
	"facts.tool_calls":                             {"object", "Present only when a loaded policy reads it (the engine builds it on demand). Tool name -> its calls in the whole history (before a compaction too), in history order, the dispatched response's included: `lib.call_count`, `lib.call_count_within` and `lib.arg_sum` read it (see \"Counting calls\")."},
	"facts.tool_calls.*":                           {"array", "The calls of one tool (the key is the tool name, as the model wrote it; framework tools included, provider-side builtin tools not)."},
	"facts.tool_calls.*[].tool_call_id":            {"string or null", "The call's id."},
	"facts.tool_calls.*[].message":                 {"number", "Index of the message holding the call."},
	"facts.tool_calls.*[].part":                    {"number", "Part index within that message."},
	"facts.tool_calls.*[].timestamp":               {"string, number or null", "That message's `timestamp`, as the history wrote it (RFC 3339 string, Unix seconds, or null)."},
	"facts.tool_calls.*[].outcome":                 {"string", "`returned` (the first outcome after the call with its id is a `tool-return`, whatever that return's own outcome), `retried` (a `retry-prompt`: the call did not execute) or `pending` (none yet, or the call has no id; the dispatched response's calls)."},
	"facts.tool_calls.*[].args":                    {"any", "The call's arguments, as `dispatch.calls[].args` reads them."},
	"facts.flow_index_truncated":                   {"boolean", "Present only when a loaded policy reads the flows. True when the index of return strings the flows were found in reached its cap (`--flow-index-cap`, 8 MiB by default) and left the later returns out: a flow from them is not reported, so a rule that lets a call through for want of a flow should fail closed (`lib.flows_complete`)."},
	"outgoing":                                     {"object", "The same facts over the history the next request sends, after the reference's cleaning."},
	"outgoing.discovered":                          {"set of strings", "Tool names revealed (searches and availability deltas) in the outgoing history."},
	"outgoing.loaded":                              {"set of strings", "Capability ids loaded in the outgoing history."},
	"filters":                                      {"object", "What the capability filters did; the policy never runs a filter itself."},
	"filters.next":                                 {"object", "Filters of the next request's active capabilities."},
	"filters.next.dropped":                         {"set of strings", "Registry tools some active filter dropped."},
	"filters.next.errors":                          {"array", "Filters that failed (error, timeout, not a set of tool names)."},
	"filters.next.errors[].capability":             {"string", "The capability whose filter failed."},
	"filters.next.errors[].message":                {"string", "Why it failed."},
	"filters.dispatch":                             {"object", "Filters of the capabilities active at dispatch (anchored evidence included)."},
	"filters.dispatch.dropped":                     {"set of strings", "Registry tools some dispatch-active filter dropped."},
	"filters.dispatch.errors":                      {"array", "Dispatch-time filter failures."},
	"filters.dispatch.errors[].capability":         {"string", "The capability whose filter failed."},
	"filters.dispatch.errors[].message":            {"string", "Why it failed."},
	"filters.errors":                               {"array", "Every filter failure of either set: non-empty means the decision fails closed."},
	"filters.errors[].capability":                  {"string", "The capability whose filter failed."},
	"filters.errors[].message":                     {"string", "Why it failed."},
	"dispatch":                                     {"object", "Present only when the history ends with a model response: the response being dispatched."},
	"dispatch.provider":                            {"string or null", "The response's `provider_name`."},
	"dispatch.window":                              {"object", "Start of the provider-anchored window of the response."},
	"dispatch.window.message":                      {"number", "Message index."},
	"dispatch.window.part":                         {"number", "Part index within that message."},
	"dispatch.loaded":                              {"set of strings", "Capability ids loaded before the response (a load in the response does not count)."},
	"dispatch.evidence":                            {"object", "What the serving provider still sees beyond the conservative window."},
	"dispatch.evidence.discovered":                 {"set of strings", "Tool names revealed only in the anchored window."},
	"dispatch.evidence.loaded":                     {"set of strings", "Deferred capabilities loaded only in the anchored window."},
	"dispatch.active_capabilities":                 {"set of strings", "Capabilities active at dispatch: their filters ran for `filters.dispatch`."},
	"dispatch.same_response":                       {"object", "Reveals and loads inside the dispatched response itself."},
	"dispatch.same_response.revealed":              {"set of strings", "Tool names a provider-side search in the response revealed (these count)."},
	"dispatch.same_response.pending_loads":         {"set of strings", "Capabilities the response asks to load (these do not count yet)."},
	"dispatch.calls":                               {"array", "The response's tool calls, in order; `deny` rules see one of them as `input.call`."},
	"dispatch.calls[].index":                       {"number", "Position among the calls (0-based)."},
	"dispatch.calls[].part":                        {"number", "Part index in the response."},
	"dispatch.calls[].tool":                        {"string", "The tool name the model called."},
	"dispatch.calls[].tool_call_id":                {"string or null", "The call's id, as in the history."},
	"dispatch.calls[].tool_kind":                   {"string or null", "`tool-search`, `capability-load` or null for an ordinary tool."},
	"dispatch.calls[].args":                        {"any", "The arguments the call would execute with: the model's (an object; a string holding a JSON object is parsed; else as sent), or the `override_args` of the approval bound to the call."},
	"dispatch.calls[].approval":                    {"object", "Present only when an approval is bound to the call: its `tool_call_id`, tool and arguments are what the approver was shown (the digest matches). `require_approval` and `deny` rules read it as `input.call.approval`."},
	"dispatch.calls[].approval.kind":               {"string", "`tool-approved` or `tool-denied`."},
	"dispatch.calls[].approval.digest":             {"string", "The call's digest (`sha256:…`), which the approval carried."},
	"dispatch.calls[].approval.approvers":          {"array", "Who answered, as the harness says (may be empty: count distinct names to ask for two approvers)."},
	"dispatch.calls[].approval.call_args":          {"any", "The model's arguments, which the approver was shown."},
	"dispatch.calls[].approval.override_args":      {"object", "The approver's edited arguments, when given (also `args`)."},
	"dispatch.calls[].approval.message":            {"string", "A denial's message for the model."},
	"dispatch.calls[].flows":                       {"array", "Present only when a loaded policy reads it (the engine builds it on demand; `input.call.flows` in a rule). One entry per argument value that came from an earlier tool return, and per return it came from: a string of the arguments that equals or contains a string of at least `--flow-min-length` bytes (8 by default) of a `tool-return` or `builtin-tool-return` part's content, or a number equal to a number of five or more significant digits there (see docs/flows.md). In the order of the arguments (keys sorted), then of the returns."},
	"dispatch.calls[].flows[].path":                {"string", "JSON pointer of the value in the call's own arguments (`\"\"` for arguments that are themselves the value); an approval's `override_args` are not searched."},
	"dispatch.calls[].flows[].match":               {"string", "`exact` (the value equals a string or number of the return) or `contains` (the value contains a string of the return)."},
	"dispatch.calls[].flows[].source":              {"object", "The return part the value came from, anywhere in the history (before a compaction too; in the dispatched response itself, a provider-side return before the call)."},
	"dispatch.calls[].flows[].source.tool_call_id": {"string or null", "The return's `tool_call_id`."},
	"dispatch.calls[].flows[].source.tool":         {"string", "The return's `tool_name`."},
	"dispatch.calls[].flows[].source.labels":       {"array", "That tool's registry labels, sorted (its own and its capability's; empty for a tool the registry does not have)."},
	"dispatch.calls[].flows[].source.message":      {"number", "Index of the message holding the return."},
	"dispatch.calls[].flows[].source.part":         {"number", "Part index within that message."},
	"dispatch.calls[].invalid_args":                {"boolean", "Present (true) only when the call's arguments fail its tool's `parameters_json_schema`: its `args` are then null and it carries no `approval`; its verdict is `invalid_args`, and no `deny` or `require_approval` rule is evaluated on it."},
}

// filterInput documents input for a capability's prepare_tools.
var filterInput = map[string]field{
	"tools":                 {"array", "Every registry tool (never the framework tools), built once per registry revision."},
	"tools[].name":          {"string", "Tool name."},
	"tools[].capability":    {"string or null", "Owning capability id."},
	"tools[].defer_loading": {"boolean", "The tool's own `defer_loading` flag."},
	"context":               {"object", "The request context, as for the decision."},
	"active_capabilities":   {"array", "Sorted ids of the capabilities active for the decision being made (next request or dispatch)."},
}

// registryData documents data.policycheck.registry.
var registryData = map[string]field{
	"tools":                  {"object", "Tool name -> `{name, capability, defer_loading, gate, description, labels}`, and `parameters_json_schema` when the registry gives the tool one; `gate` is `none`, `search` or `capability`; `labels` is the sorted array of the tool's labels and its capability's."},
	"capabilities":           {"object", "Capability id -> `{id, defer_loading, description, labels}`; `labels` is a sorted array."},
	"names":                  {"set of strings", "Every registry tool name."},
	"always_available":       {"set of strings", "Tools available without any reveal or load."},
	"search_gated":           {"set of strings", "Deferred tools a search reveals (no deferred owner)."},
	"deferred_capabilities":  {"set of strings", "Capabilities with `defer_loading: true`."},
	"always_on_capabilities": {"set of strings", "The other registered capabilities."},
	"capability_tools":       {"object", "Deferred capability id -> set of the tools it owns (what a load reveals)."},
	"owned_tools":            {"object", "Every registered capability id, deferred or always-on -> set of the tools it owns (for filters: `lib.registry_keep_own`)."},
}

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
var mapPaths = map[string]bool{"facts.tool_calls": true}

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

hide contains "get_time" if object.keys(data.policycheck.registry) != %s

hide contains "get_time" if {
	some p in %s
	not is_set(data.policycheck.registry[p[0]])
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
		keysOf(registryData), setPaths(registryData, "set of strings"),
		setPaths(decisionInput, "set of strings"), setPaths(registryData, "set of strings"))
	filter := fmt.Sprintf(`package policycheck.capabilities.docs

prepare_tools := {t.name | some t in input.tools} if {
	object.keys(input) == %s
	every t in input.tools {
		object.keys(t) == {"name", "capability", "defer_loading"}
	}
	is_array(input.active_capabilities)
} else := set()
`, keysOf(filterInput))
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
	opaque := map[string]bool{"context": true, "dispatch.calls[].args": true, "facts.tool_calls.*[].args": true,
		"dispatch.calls[].approval.call_args": true, "dispatch.calls[].approval.override_args": true}
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
				"t1": {Kind: facts.ToolApproved, Digest: engine.CallDigest(calls[0].ToolCallID, calls[0].Tool, calls[0].Args),
					Approvers: []string{"ana"}, OverrideArgs: []byte(`{"from": "ops", "to": "supplier", "amount": 1}`)},
				"t2": {Kind: facts.ToolDenied, Digest: engine.CallDigest(calls[1].ToolCallID, calls[1].Tool, calls[1].Args), Message: "no"},
			}
			walkInput(eng, req)
			// An override the registry's schema refuses: the call is
			// marked invalid_args.
			req.Approvals = facts.Approvals{"t1": {Kind: facts.ToolApproved,
				Digest:       engine.CallDigest(calls[0].ToolCallID, calls[0].Tool, calls[0].Args),
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
	checkDeclared(t, "decision input", decisionInput, seen)

	generated := map[string]string{
		"decision-input": table(decisionInput),
		"filter-input":   table(filterInput),
		"registry-data":  table(registryData),
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

// TestInputTablesAreTheContracts: the input fields documented here are
// the ones the operator contract accepts references to (a reference to
// any other is refused at load), field for field.
func TestInputTablesAreTheContracts(t *testing.T) {
	decision, filter := contract.InputFields()
	for name, pair := range map[string]struct {
		doc      map[string]field
		contract []string
	}{"decision input": {decisionInput, decision}, "filter input": {filterInput, filter}} {
		var doc []string
		for p := range pair.doc {
			doc = append(doc, p)
		}
		sort.Strings(doc)
		if strings.Join(doc, "\n") != strings.Join(pair.contract, "\n") {
			t.Errorf("%s: docs/input.md has\n%s\nthe contract has\n%s", name, strings.Join(doc, "\n"), strings.Join(pair.contract, "\n"))
		}
	}
}
