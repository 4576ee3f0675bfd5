package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// nearMissHistory searches and loads with the framework tools' names but
// without tool_kind: the untyped search_tools return at message 2, part 0
// reveals nothing and the untyped load pair (message 3, part 0 and message
// 4, part 0) loads nothing (spec W18).
const nearMissHistory = `[
 {"kind":"request","parts":[` + userPrompt + `]},
 {"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"search_tools","tool_call_id":"s1","args":{"queries":["docs"]}}]},
 {"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"search_tools","tool_call_id":"s1","content":{"discovered_tools":[{"name":"find_docs"}]}}]},
 {"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"load_capability","tool_call_id":"l1","args":{"id":"vault"}}]},
 {"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"load_capability","tool_call_id":"l1","content":{}}]},
 {"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"find_docs","tool_call_id":"c1","args":{}}]}
]`

const nearMissRegistry = goodRegYML + "  - name: find_docs\n    defer_loading: true\n"

// TestExplainListsNearMisses: explain names, in every format, the parts
// that look like a search return or a load but do not count, where the
// tools' stories say only that they were never revealed or loaded.
func TestExplainListsNearMisses(t *testing.T) {
	dir := t.TempDir()
	args := []string{"explain", "--registry", writeFile(t, dir, "registry.yaml", nearMissRegistry),
		"--history", writeFile(t, dir, "history.json", nearMissHistory)}
	want := []string{
		"message 2, part 0 is a `search_tools` return without `tool_kind: tool-search`: not counted",
		"message 3, part 0 is a `load_capability` call without `tool_kind: capability-load`: not counted",
		"message 4, part 0 is a `load_capability` return without `tool_kind: capability-load`: not counted",
	}

	text := run(t, "", args...)
	if text.code != 0 {
		t.Fatalf("explain: exit %d: %s", text.code, text.stderr)
	}
	for _, w := range want {
		if !strings.Contains(text.stdout, "  "+w+"\n") {
			t.Errorf("explain's text does not list %q:\n%s", w, text.stdout)
		}
	}
	for _, w := range []string{"1 part looks like a search but does not count: see the near misses",
		"2 parts look like a load but do not count: see the near misses"} {
		if !strings.Contains(text.stdout, w) {
			t.Errorf("no tool's story points at the near misses (%q):\n%s", w, text.stdout)
		}
	}

	js := run(t, "", append(args, "--format", "json")...)
	var x struct {
		NearMisses []struct {
			At  struct{ Message, Part int }
			Why string
		} `json:"near_misses"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &x); err != nil {
		t.Fatalf("explain --format json: %v\n%s", err, js.stdout)
	}
	if len(x.NearMisses) != len(want) {
		t.Fatalf("explain --format json lists %d near misses, want %d: %+v", len(x.NearMisses), len(want), x.NearMisses)
	}
	for i, nm := range x.NearMisses {
		if nm.Why != want[i] || nm.At.Message != []int{2, 3, 4}[i] || nm.At.Part != 0 {
			t.Errorf("near miss %d is %+v, want %q", i, nm, want[i])
		}
	}

	page := run(t, "", append(args, "--format", "html")...)
	for _, w := range []string{`<section id="near-misses">`, `<a href="#m2p0">message 2, part 0 is a `, `class="mark near-miss"`} {
		if !strings.Contains(page.stdout, w) {
			t.Errorf("explain's page lacks %q", w)
		}
	}
}

// TestExplainTypedPartsAreNoNearMiss: the same history with its
// tool_kinds reveals and loads, and lists no near miss (an empty list in
// JSON, no section elsewhere).
func TestExplainTypedPartsAreNoNearMiss(t *testing.T) {
	dir := t.TempDir()
	typed := strings.NewReplacer(`"tool_name":"search_tools",`, `"tool_name":"search_tools","tool_kind":"tool-search",`,
		`"tool_name":"load_capability",`, `"tool_name":"load_capability","tool_kind":"capability-load",`).Replace(nearMissHistory)
	args := []string{"explain", "--registry", writeFile(t, dir, "registry.yaml", nearMissRegistry),
		"--history", writeFile(t, dir, "history.json", typed)}
	if text := run(t, "", args...); text.code != 0 || strings.Contains(text.stdout, "Near misses") || strings.Contains(text.stdout, "never revealed") {
		t.Errorf("explain of typed parts: exit %d, %s\n%s", text.code, text.stderr, text.stdout)
	}
	if js := run(t, "", append(args, "--format", "json")...); !strings.Contains(js.stdout, `"near_misses": []`) {
		t.Errorf("explain --format json of typed parts has no empty near_misses:\n%s", js.stdout)
	}
}
