package gateway

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// The meta-tools search_tools and load_capability, which the gateway
// answers itself as pydantic-ai's ToolSearch and deferred capabilities do
// (spec §10, X9): their calls and returns are typed in the history
// exactly as pydantic-ai types them, so that facts derive as for a
// pydantic-ai history.

// maxSearchResults is pydantic-ai's default max_results (spec S4).
const maxSearchResults = 10

const (
	emptyQueryMessage = "Please provide at least one non-empty search query."
	noMatchMessage    = "No matching tools found. The tools you need may not be available."
)

// searchArgs reads a search call's arguments, as the engine read them
// (facts.ReadArgs, the one reading of a call's arguments): ok when they
// have the typed shape ({"queries": [string...]}, spec W16), problems
// when they break the tool's own schema (extra keys are refused, spec
// S3): at most facts.MaxArgsProblems, as the engine lists a schema's,
// and how many more there were (a call with many extra keys would
// otherwise be answered, and its history written, with a message
// several times its size).
func searchArgs(args []byte) (queries []string, typed bool, probs []facts.ArgsProblem, omitted int) {
	m, ok := facts.ReadArgs(args).Value.(map[string]any)
	if !ok {
		return nil, false, []facts.ArgsProblem{{Pointer: "", Reason: "the arguments must be an object"}}, 0
	}
	raw, ok := m["queries"]
	if !ok {
		probs = append(probs, facts.ArgsProblem{Pointer: "", Reason: "missing property 'queries'"})
	} else if queries, ok = stringList(raw); !ok {
		probs = append(probs, facts.ArgsProblem{Pointer: "/queries", Reason: "must be a list of strings"})
		queries = nil
	} else {
		typed = true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "queries" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if len(probs) == facts.MaxArgsProblems {
			omitted++
			continue
		}
		probs = append(probs, facts.ArgsProblem{Pointer: "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"),
			Reason: "additional properties are not allowed"})
	}
	return queries, typed, probs, omitted
}

// stringList is v as a list of strings; ok is false for anything else
// (null included).
func stringList(v any) ([]string, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// loadArgs reads a load call's arguments, as the engine read them
// (facts.ReadArgs): typed when {"id": string} (extra keys are ignored,
// spec X9).
func loadArgs(args []byte) (id string, typed bool, probs []facts.ArgsProblem) {
	m, ok := facts.ReadArgs(args).Value.(map[string]any)
	if !ok {
		return "", false, []facts.ArgsProblem{{Pointer: "", Reason: "the arguments must be an object"}}
	}
	raw, ok := m["id"]
	if !ok {
		return "", false, []facts.ArgsProblem{{Pointer: "", Reason: "missing property 'id'"}}
	}
	if id, ok = raw.(string); !ok {
		return "", false, []facts.ArgsProblem{{Pointer: "/id", Reason: "must be a string"}}
	}
	return id, true, nil
}

var tokenRun = regexp.MustCompile(`[a-z0-9]+`)

// tokens is spec S4's tokenizer: maximal runs of [a-z0-9] in the
// lowercased text.
func tokens(s string) map[string]struct{} {
	out := map[string]struct{}{}
	for _, t := range tokenRun.FindAllString(strings.ToLower(s), -1) {
		out[t] = struct{}{}
	}
	return out
}

// searchCorpus is the search-gated tools of the registry, in registry
// order, that nothing in decision d removed: what a search may reveal.
// A tool a filter or rule removed is never named to the session.
func searchCorpus(reg *facts.Registry, d *engine.Decision) []facts.Tool {
	var out []facts.Tool
	for _, t := range reg.Tools() {
		if g, _ := reg.GateOf(t.Name); g != facts.GateSearch {
			continue
		}
		if d.Removed(t.Name) != nil {
			continue
		}
		out = append(out, t)
	}
	return out
}

// search is spec S4's default strategy: the matches, undiscovered first,
// then by score, corpus order breaking ties, at most maxSearchResults.
// ok is false when the queries hold no token (the retry of S3).
func search(queries []string, corpus []facts.Tool, discovered []string) (names []string, ok bool) {
	q := tokens(strings.Join(queries, " "))
	if len(q) == 0 {
		return nil, false
	}
	type hit struct {
		name         string
		undiscovered bool
		score        int
	}
	var hits []hit
	for _, t := range corpus {
		tt := tokens(t.Name)
		for k := range tokens(t.Description) {
			tt[k] = struct{}{}
		}
		// The score is how many of the query's tokens the tool has,
		// counted over the tool's tokens: a query of any size costs each
		// tool its own few tokens, not the query's.
		score := 0
		for k := range tt {
			if _, ok := q[k]; ok {
				score++
			}
		}
		if score > 0 {
			_, found := slices.BinarySearch(discovered, t.Name)
			hits = append(hits, hit{t.Name, !found, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if a.undiscovered != b.undiscovered {
			if a.undiscovered {
				return -1
			}
			return 1
		}
		return b.score - a.score
	})
	names = []string{}
	for i, h := range hits {
		if i == maxSearchResults {
			break
		}
		names = append(names, h.name)
	}
	return names, true
}

// searchContent is the typed search return's content (spec S4 step 6).
func searchContent(names []string) []byte {
	type match struct {
		Name string `json:"name"`
	}
	type content struct {
		DiscoveredTools []match `json:"discovered_tools"`
		Message         string  `json:"message,omitempty"`
	}
	c := content{DiscoveredTools: []match{}}
	for _, n := range names {
		c.DiscoveredTools = append(c.DiscoveredTools, match{n})
	}
	if len(names) == 0 {
		c.Message = noMatchMessage
	}
	raw, _ := json.Marshal(c) // strings only
	return raw
}

// pyQuote is Python's repr of a string as the reference's messages quote
// ids: single quotes, unless the string holds one and no double quote.
func pyQuote(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

// loadOutcome is what executing load_capability(id) does (spec X9): a
// retry message, or the return's content and the delta's names.
func loadOutcome(reg *facts.Registry, d *engine.Decision, id string) (retry string, content []byte, added []string) {
	c, ok := reg.Capability(id)
	if !ok {
		return fmt.Sprintf("No capability found with id %s.", pyQuote(id)), nil, nil
	}
	active := d.Facts.ActiveCapabilities
	if d.Dispatch != nil {
		active = d.Dispatch.ActiveCapabilities
	}
	if slices.Contains(active, id) {
		return fmt.Sprintf("Capability %s is already available. Use its existing instructions and any tools it provides; do not call `load_capability` for it again.", pyQuote(id)), nil, nil
	}
	content = []byte("{}")
	if c.Description != "" {
		content, _ = json.Marshal(map[string]string{"instructions": c.Description})
	}
	// The delta: the capability's resolved tools, sorted, pruned of the
	// names already discovered (W19, W21).
	for _, n := range reg.CapabilityTools(id) {
		if d.Removed(n) != nil {
			continue
		}
		if _, found := slices.BinarySearch(d.Facts.Discovered, n); found {
			continue
		}
		added = append(added, n)
	}
	return "", content, added
}

// Meta-tool definitions as the gateway lists them.
func searchToolDef() *mcp.Tool {
	return &mcp.Tool{
		Name: facts.SearchTool,
		Description: "Search for tools that are not listed yet by keywords in their names and descriptions. " +
			"The tools found can be called by name right away.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"queries":{"type":"array","items":{"type":"string"},` +
			`"description":"Keywords to search tool names and descriptions for."}},"required":["queries"],"additionalProperties":false}`),
	}
}

func loadToolDef(reg *facts.Registry) *mcp.Tool {
	var b strings.Builder
	b.WriteString("Load a capability by id: its instructions, and its tools become callable. Capabilities:")
	for _, id := range reg.DeferredCapabilities() {
		c, _ := reg.Capability(id)
		b.WriteString("\n- " + id)
		if c.Description != "" {
			b.WriteString(": " + c.Description)
		}
	}
	return &mcp.Tool{
		Name:        facts.LoadCapabilityTool,
		Description: b.String(),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The capability's id."}},"required":["id"]}`),
	}
}
