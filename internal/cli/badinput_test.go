package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/loader"
)

// result is what one in-process run of the command line produced.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the command line in-process. A panic fails the test with the
// arguments and the stack instead of crashing the suite.
func run(t *testing.T, stdin string, args ...string) (res result) {
	t.Helper()
	var out, errb bytes.Buffer
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("policycheck %s panicked: %v\n%s", strings.Join(args, " "), r, debug.Stack())
		}
	}()
	res.code = cli.Run(args, strings.NewReader(stdin), &out, &errb)
	res.stdout, res.stderr = out.String(), errb.String()
	return res
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// History builders: compact pydantic-ai messages, enough for the decoder.
const (
	userPrompt = `{"part_kind":"user-prompt","content":"hi"}`
	callTime   = `{"part_kind":"tool-call","tool_name":"get_time","tool_call_id":"c1","args":{}}`
	searchCall = `{"part_kind":"tool-call","tool_name":"search_tools","tool_kind":"tool-search","tool_call_id":"s1","args":{"queries":["docs"]}}`
	loadCall   = `{"part_kind":"tool-call","tool_name":"load_capability","tool_kind":"capability-load","tool_call_id":"l1","args":{"id":"vault"}}`
	goodRegYML = "capabilities:\n  - id: vault\n    defer_loading: true\ntools:\n  - name: get_time\n  - name: secret_op\n    capability: vault\n"
)

func req(parts ...string) string {
	return `{"kind":"request","parts":[` + strings.Join(parts, ",") + `]}`
}

func resp(parts ...string) string {
	return `{"kind":"response","parts":[` + strings.Join(parts, ",") + `]}`
}

func hist(msgs ...string) string { return "[" + strings.Join(msgs, ",") + "]" }

// withKey inserts `"key":value,` at the start of a message or part object.
func withKey(obj, key, value string) string {
	return `{"` + key + `":` + value + "," + obj[1:]
}

// searchReturn is a typed search return with the given content.
func searchReturn(content string) string {
	return `{"part_kind":"tool-return","tool_name":"search_tools","tool_kind":"tool-search","tool_call_id":"s1","content":` + content + `}`
}

// billionLaughs is a YAML document of a few hundred bytes whose aliases
// expand to 9^9 strings.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for c := 'b'; c <= 'i'; c++ {
		p := string(c - 1)
		fmt.Fprintf(&b, "%c: &%c [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", c, c, p, p, p, p, p, p, p, p, p)
	}
	return b.String()
}

// deep nests n arrays.
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// deepPointer is the pointer the decoder reports when the nesting limit is
// hit inside base: base followed by limit-depth "/0" steps.
func deepPointer(base string, steps int) string { return base + strings.Repeat("/0", steps) }

// TestBadInput feeds malformed and hostile histories, registries, contexts,
// policies and flags to the command line: each must be refused with exit
// status 2, nothing on stdout (no half-made decision), and one error on
// stderr naming the file, the JSON pointer and the rule broken.
func TestBadInput(t *testing.T) {
	t.Parallel()
	maxDepth := loader.DefaultLimits().MaxDepth
	validHist := hist(req(userPrompt), resp(callTime))

	tests := []struct {
		note string
		// which input is bad: "history" (default), "registry" or "context"
		input string
		// file name of the bad input (default history.json / registry.yaml / context.json)
		name string
		data string
		// extra arguments
		args []string
		// ptr is the exact JSON pointer in the message ("(root)" for the
		// document); rule a fragment of the rule broken.
		ptr, rule string
		// raw: the case has no file/pointer form (missing file, flags,
		// policies); want lists fragments of stderr, with {file} for the
		// bad input's path.
		raw  bool
		want []string
		// evalOnly: the case is about an eval-only input (a policy).
		evalOnly bool
		stdin    string
		// bare: no --registry/--history given unless args has them
		bare bool
	}{
		// --- syntax ---
		{note: "truncated JSON", data: `[{"kind":"request","parts":[{"part_kind":"user-pro`,
			ptr: "/0/parts/0/part_kind", rule: "invalid JSON: unterminated string (line 1, column 51)"},
		{note: "truncated after a value", data: `[{"kind":"request","parts":[]}`,
			ptr: "(root)", rule: "invalid JSON: unexpected end of input"},
		{note: "empty file", data: ``, ptr: "(root)", rule: "invalid JSON: unexpected end of input"},
		{note: "whitespace only", data: " \n\t ", ptr: "(root)", rule: "invalid JSON: unexpected end of input"},
		{note: "trailing garbage after the array", data: validHist + ` x`,
			ptr: "(root)", rule: "invalid JSON: unexpected data after the history"},
		{note: "a second document after the array", data: validHist + validHist,
			ptr: "(root)", rule: "invalid JSON: unexpected data after the history"},
		{note: "NUL byte after the array", data: "[]\x00",
			ptr: "(root)", rule: "invalid JSON: unexpected data after the history (line 1, column 3)"},
		{note: "NUL byte inside the array", data: "[\x00]",
			ptr: "/0", rule: "invalid JSON: unexpected byte 0x00"},
		{note: "NUL byte between messages", data: "[" + req(userPrompt) + "\x00]",
			ptr: "(root)", rule: "invalid JSON: unexpected byte 0x00"},
		{note: "invalid UTF-8 inside a string", data: hist(req(`{"part_kind":"user-prompt","content":"caf` + "\xc3\x28" + `"}`)),
			ptr: "/0/parts/0/content", rule: "invalid UTF-8 in string"},
		{note: "invalid UTF-8 inside a key", data: hist(withKey(req(userPrompt), "k\xff", "1")),
			ptr: "/0", rule: "invalid UTF-8 in string"},
		{note: "control character in a string", data: hist(req(`{"part_kind":"user-prompt","content":"a` + "\x01" + `b"}`)),
			ptr: "/0/parts/0/content", rule: "invalid JSON: control character 0x01 in string"},
		{note: "raw newline in a string", data: hist(req(`{"part_kind":"user-prompt","content":"a` + "\n" + `b"}`)),
			ptr: "/0/parts/0/content", rule: "invalid JSON: control character 0x0a in string"},
		{note: "bad escape", data: hist(req(`{"part_kind":"user-prompt","content":"a\qb"}`)),
			ptr: "/0/parts/0/content", rule: `invalid JSON: bad escape \q`},
		{note: "bad unicode escape", data: hist(req(`{"part_kind":"user-prompt","content":"\u12x4"}`)),
			ptr: "/0/parts/0/content", rule: `invalid JSON: bad \u escape`},
		{note: "number with a leading zero", data: hist(withKey(req(userPrompt), "timestamp", "01")),
			ptr: "/0", rule: "invalid JSON: unexpected character '1'"},
		{note: "single-quoted string", data: `[{'kind':'request'}]`,
			ptr: "/0", rule: "invalid JSON"},
		{note: "byte order mark", data: "\xef\xbb\xbf" + validHist,
			ptr: "(root)", rule: "invalid JSON"},
		// --- limits ---
		{note: "100,000-deep nesting inside a tool return's content",
			data: hist(req(`{"part_kind":"tool-return","tool_name":"get_time","tool_call_id":"c1","content":` + deep(100_000) + `}`)),
			ptr:  deepPointer("/0/parts/0/content", maxDepth-4), rule: fmt.Sprintf("nesting deeper than the limit of %d", maxDepth)},
		{note: "100,000-deep nesting at the top level", data: deep(100_000),
			ptr: deepPointer("", maxDepth), rule: fmt.Sprintf("nesting deeper than the limit of %d", maxDepth)},
		{note: "100,000-deep objects in metadata",
			data: hist(withKey(req(userPrompt), "metadata", strings.Repeat(`{"a":`, 100_000)+"1"+strings.Repeat("}", 100_000))),
			ptr:  "/0/metadata" + strings.Repeat("/a", maxDepth-2), rule: fmt.Sprintf("nesting deeper than the limit of %d", maxDepth)},
		{note: "input over --max-bytes", data: validHist, args: []string{"--max-bytes", "64"},
			ptr: "(root)", rule: fmt.Sprintf("input is %d bytes, over the limit of 64", len(validHist))},
		{note: "more messages than --max-messages", data: validHist, args: []string{"--max-messages", "1"},
			ptr: "/1", rule: "more than 1 messages"},
		{note: "more parts than --max-parts-per-message", data: hist(req(userPrompt, userPrompt)),
			args: []string{"--max-parts-per-message", "1"}, ptr: "/0/parts/1", rule: "more than 1 parts in one message"},
		{note: "more parts than --max-parts", data: validHist, args: []string{"--max-parts", "1"},
			ptr: "/1/parts/0", rule: "more than 1 parts in the history"},
		{note: "deeper than --max-depth", data: validHist, args: []string{"--max-depth", "3"},
			ptr: "/0/parts/0", rule: "nesting deeper than the limit of 3"},
		// --- shape ---
		{note: "wrong top-level type: object", data: req(userPrompt),
			ptr: "(root)", rule: "a history must be an array of messages"},
		{note: "wrong top-level type: string", data: `"hello"`,
			ptr: "(root)", rule: "a history must be an array of messages"},
		{note: "message that is not an object", data: hist(req(userPrompt), `42`),
			ptr: "/1", rule: "a message must be an object"},
		{note: "message that is null", data: hist(`null`),
			ptr: "/0", rule: "a message must be an object"},
		{note: "missing kind", data: `[{"parts":[]}]`,
			ptr: "/0", rule: `missing required key "kind"`},
		{note: "unknown kind", data: `[{"kind":"system","parts":[]}]`,
			ptr: "/0/kind", rule: `"system" is not one of "request", "response"`},
		{note: "kind not a string", data: `[{"kind":1,"parts":[]}]`,
			ptr: "/0/kind", rule: "must be a string, not a number"},
		{note: "missing parts", data: `[{"kind":"request"}]`,
			ptr: "/0", rule: `missing required key "parts"`},
		{note: "parts not an array", data: `[{"kind":"request","parts":{}}]`,
			ptr: "/0/parts", rule: "must be an array, not an object"},
		{note: "part that is not an object", data: hist(req(userPrompt, `"text"`)),
			ptr: "/0/parts/1", rule: "a part must be an object"},
		{note: "missing part_kind", data: hist(req(`{"content":"hi"}`)),
			ptr: "/0/parts/0", rule: `missing required key "part_kind"`},
		{note: "unknown part_kind", data: hist(req(userPrompt), resp(callTime, `{"part_kind":"telepathy"}`)),
			ptr: "/1/parts/1/part_kind", rule: `unknown part_kind "telepathy"`},
		{note: "compaction in a request", data: hist(req(userPrompt, `{"part_kind":"compaction","content":"x"}`)),
			ptr: "/0/parts/1/part_kind", rule: `"compaction" is not allowed in a request`},
		{note: "tool-call in a request", data: hist(req(callTime)),
			ptr: "/0/parts/0/part_kind", rule: `"tool-call" is not allowed in a request`},
		{note: "tool-return in a response",
			data: hist(req(userPrompt), resp(callTime), req(userPrompt), resp(`{"part_kind":"tool-return","tool_name":"get_time","tool_call_id":"c1","content":"12:00"}`)),
			ptr:  "/3/parts/0/part_kind", rule: `"tool-return" is not allowed in a response`},
		{note: "delta in a response", data: hist(req(userPrompt), resp(callTime, `{"part_kind":"tool-availability-delta","tools_added":["x"]}`)),
			ptr: "/1/parts/1/part_kind", rule: `"tool-availability-delta" is not allowed in a response`},
		{note: "user-prompt in a response", data: hist(req(userPrompt), resp(userPrompt)),
			ptr: "/1/parts/0/part_kind", rule: `"user-prompt" is not allowed in a response`},
		{note: "tool-call without tool_name", data: hist(req(userPrompt), resp(`{"part_kind":"tool-call","tool_call_id":"c1"}`)),
			ptr: "/1/parts/0", rule: `missing required key "tool_name"`},
		// --- typed payloads ---
		{note: "unknown tool_kind", data: hist(req(userPrompt), resp(`{"part_kind":"tool-call","tool_name":"x","tool_kind":"mcp_server","args":{}}`)),
			ptr: "/1/parts/0/tool_kind", rule: `"mcp_server" is not one of "tool-search", "capability-load"`},
		{note: "typed search call named find", data: hist(req(userPrompt), resp(`{"part_kind":"tool-call","tool_name":"find","tool_kind":"tool-search","args":{"queries":["x"]}}`)),
			ptr: "/1/parts/0/tool_name", rule: `must be named "search_tools", not "find"`},
		{note: "typed load call named load", data: hist(req(userPrompt), resp(`{"part_kind":"tool-call","tool_name":"load","tool_kind":"capability-load","args":{"id":"vault"}}`)),
			ptr: "/1/parts/0/tool_name", rule: `must be named "load_capability", not "load"`},
		{note: `load args {"id": 5}`, data: hist(req(userPrompt), resp(strings.Replace(loadCall, `"vault"`, `5`, 1))),
			ptr: "/1/parts/0/args/id", rule: "a capability id must be a string, not a number"},
		{note: `load args {"name": "x"}`, data: hist(req(userPrompt), resp(strings.Replace(loadCall, `{"id":"vault"}`, `{"name":"x"}`, 1))),
			ptr: "/1/parts/0/args", rule: `a typed load call's args must have "id"`},
		{note: "load args a number", data: hist(req(userPrompt), resp(strings.Replace(loadCall, `{"id":"vault"}`, `7`, 1))),
			ptr: "/1/parts/0/args", rule: "must be a string, an object or null, not a number"},
		{note: "load return content a string",
			data: hist(req(userPrompt), resp(loadCall), req(`{"part_kind":"tool-return","tool_name":"load_capability","tool_kind":"capability-load","tool_call_id":"l1","content":"loaded"}`)),
			ptr:  "/2/parts/0/content", rule: "must be an object, not a string"},
		{note: "load return instructions not a string",
			data: hist(req(userPrompt), resp(loadCall), req(`{"part_kind":"tool-return","tool_name":"load_capability","tool_kind":"capability-load","tool_call_id":"l1","content":{"instructions":1}}`)),
			ptr:  "/2/parts/0/content/instructions", rule: "must be a string, not a number"},
		{note: "search return without discovered_tools", data: hist(req(userPrompt), resp(searchCall), req(searchReturn(`{"message":"none"}`))),
			ptr: "/2/parts/0/content", rule: `a typed search return's content must have "discovered_tools"`},
		{note: "search return content an array", data: hist(req(userPrompt), resp(searchCall), req(searchReturn(`[]`))),
			ptr: "/2/parts/0/content", rule: "must be an object, not an array"},
		{note: "search return discovered_tools not an array", data: hist(req(userPrompt), resp(searchCall), req(searchReturn(`{"discovered_tools":"search_docs"}`))),
			ptr: "/2/parts/0/content/discovered_tools", rule: "must be an array of tool matches, not a string"},
		{note: "a match without name", data: hist(req(userPrompt), resp(searchCall), req(searchReturn(`{"discovered_tools":[{"name":"a"},{"description":"b"}]}`))),
			ptr: "/2/parts/0/content/discovered_tools/1", rule: `a tool match must have "name"`},
		{note: "a match that is a string", data: hist(req(userPrompt), resp(searchCall), req(searchReturn(`{"discovered_tools":["search_docs"]}`))),
			ptr: "/2/parts/0/content/discovered_tools/0", rule: "a tool match must be an object, not a string"},
		{note: "a match name not a string", data: hist(req(userPrompt), resp(searchCall), req(searchReturn(`{"discovered_tools":[{"name":null}]}`))),
			ptr: "/2/parts/0/content/discovered_tools/0/name", rule: "must be a string, not null"},
		{note: "search args {}", data: hist(req(userPrompt), resp(strings.Replace(searchCall, `{"queries":["docs"]}`, `{}`, 1))),
			ptr: "/1/parts/0/args", rule: `a typed search call's args must have "queries"`},
		{note: `search args {"queries": "x"}`, data: hist(req(userPrompt), resp(strings.Replace(searchCall, `["docs"]`, `"x"`, 1))),
			ptr: "/1/parts/0/args/queries", rule: "must be an array of strings, not a string"},
		{note: "search query not a string", data: hist(req(userPrompt), resp(strings.Replace(searchCall, `["docs"]`, `["a",2]`, 1))),
			ptr: "/1/parts/0/args/queries/1", rule: "must be a string, not a number"},
		{note: "delta tools_added null", data: hist(req(userPrompt, `{"part_kind":"tool-availability-delta","tools_added":null}`)),
			ptr: "/0/parts/1/tools_added", rule: "must be an array, not null"},
		{note: "delta legacy added with a number", data: hist(req(userPrompt, `{"part_kind":"tool-availability-delta","added":["a",1]}`)),
			ptr: "/0/parts/1/added/1", rule: "must be a string, not a number"},
		{note: "outcome unknown", data: hist(req(userPrompt), resp(callTime), req(`{"part_kind":"tool-return","tool_name":"get_time","tool_call_id":"c1","content":"12:00","outcome":"maybe"}`)),
			ptr: "/2/parts/0/outcome", rule: `"maybe" is not one of "success", "failed", "denied", "interrupted"`},
		{note: "tool_call_id a number", data: hist(req(userPrompt), resp(`{"part_kind":"tool-call","tool_name":"get_time","tool_call_id":7}`)),
			ptr: "/1/parts/0/tool_call_id", rule: "must be a string, not a number"},
		// --- literal fields ---
		{note: `state "zzz"`, data: hist(withKey(req(userPrompt), "state", `"zzz"`)),
			ptr: "/0/state", rule: `"zzz" is not one of "complete", "interrupted"`},
		{note: `response state "zzz"`, data: hist(req(userPrompt), withKey(resp(callTime), "state", `"zzz"`)),
			ptr: "/1/state", rule: `"zzz" is not one of "complete", "incomplete", "suspended", "interrupted"`},
		{note: `finish_reason "nope"`, data: hist(req(userPrompt), withKey(resp(callTime), "finish_reason", `"nope"`)),
			ptr: "/1/finish_reason", rule: `"nope" is not one of "stop", "length", "content_filter", "tool_call", "error"`},
		{note: "timestamp of the wrong type", data: hist(withKey(req(userPrompt), "timestamp", `true`)),
			ptr: "/0/timestamp", rule: "must be a string, a number or null, not a boolean"},
		{note: "part timestamp of the wrong type", data: hist(req(`{"part_kind":"user-prompt","content":"hi","timestamp":{}}`)),
			ptr: "/0/parts/0/timestamp", rule: "must be a string, a number or null, not an object"},
		{note: "provider_name of the wrong type", data: hist(req(userPrompt), withKey(resp(callTime), "provider_name", `["anthropic"]`)),
			ptr: "/1/provider_name", rule: "must be a string or null, not an array"},
		{note: "usage not an object", data: hist(req(userPrompt), withKey(resp(callTime), "usage", `null`)),
			ptr: "/1/usage", rule: "must be an object, not null"},

		// --- registries ---
		{note: "registry: duplicate tool names", input: "registry",
			data: "tools:\n  - name: get_time\n  - name: get_time\n",
			ptr:  "/tools/1/name", rule: `duplicate tool name "get_time"`},
		{note: "registry: duplicate capability ids", input: "registry",
			data: "capabilities:\n  - id: vault\n  - id: vault\n",
			ptr:  "/capabilities/1/id", rule: `duplicate capability id "vault"`},
		{note: "registry: a tool naming an unknown capability", input: "registry",
			data: "tools:\n  - name: secret_op\n    capability: vualt\n",
			ptr:  "/tools/0/capability", rule: `unknown capability "vualt"`},
		{note: "registry: a deferred capability without an id", input: "registry",
			data: "capabilities:\n  - defer_loading: true\n",
			ptr:  "/capabilities/0", rule: `missing required key "id"`},
		{note: "registry: a deferred capability with an empty id", input: "registry",
			data: "capabilities:\n  - id: \"\"\n    defer_loading: true\n",
			ptr:  "/capabilities/0/id", rule: "must not be empty"},
		{note: "registry: a tool named load_capability", input: "registry",
			data: "capabilities:\n  - id: vault\n    defer_loading: true\ntools:\n  - name: load_capability\n",
			ptr:  "/tools/0/name", rule: "tool name 'load_capability' is reserved"},
		{note: "registry: a tool named search_tools", input: "registry",
			data: "tools:\n  - name: get_time\n  - name: search_tools\n",
			ptr:  "/tools/1/name", rule: "tool name 'search_tools' is reserved"},
		{note: "registry: unknown key defer_loadng", input: "registry",
			data: "tools:\n  - name: search_docs\n    defer_loadng: true\n",
			ptr:  "/tools/0/defer_loadng", rule: `unknown key "defer_loadng"`},
		{note: "registry: unknown top-level key", input: "registry",
			data: "tool:\n  - name: get_time\n",
			ptr:  "/tool", rule: `unknown key "tool"`},
		{note: "registry: max_retries negative", input: "registry",
			data: "tools:\n  - name: get_time\n    max_retries: -1\n",
			ptr:  "/tools/0/max_retries", rule: "must be >= 0"},
		{note: "registry: max_retries not an integer", input: "registry",
			data: "tools:\n  - name: get_time\n    max_retries: 1.5\n",
			ptr:  "/tools/0/max_retries", rule: "integer"},
		{note: "registry: defer_loading as a string", input: "registry",
			data: "tools:\n  - name: search_docs\n    defer_loading: \"yes\"\n",
			ptr:  "/tools/0/defer_loading", rule: "must be a boolean, not a string"},
		{note: "registry: tools not a list", input: "registry",
			data: "tools:\n  name: get_time\n",
			ptr:  "/tools", rule: "must be an array, not an object"},
		{note: "registry: a tool without a name", input: "registry",
			data: "tools:\n  - description: nameless\n",
			ptr:  "/tools/0", rule: `missing required key "name"`},
		{note: "registry: YAML syntax error", input: "registry",
			data: "tools:\n  - name: get_time\n   bad: [\n",
			ptr:  "(root)", rule: "invalid YAML"},
		{note: "registry: YAML a bare list", input: "registry",
			data: "- name: get_time\n",
			ptr:  "(root)", rule: "must be an object, not an array"},
		{note: "registry: YAML non-string key", input: "registry",
			data: "tools:\n  - name: get_time\n    1: x\n",
			ptr:  "/tools/0", rule: "mapping keys must be strings"},
		{note: "registry: a recursive YAML alias", input: "registry",
			data: "a: &x [*x]\n",
			ptr:  deepPointer("/a", 128), rule: "nesting deeper than the limit of 128 (a recursive alias?)"},
		{note: "registry: billion laughs", input: "registry",
			data: billionLaughs(),
			ptr:  "/e/7/4/7/1/8", rule: "too many values once aliases are expanded (an alias bomb?)"},
		{note: "registry: 100,000-deep YAML", input: "registry",
			data: "tools: " + deep(100_000) + "\n",
			ptr:  "(root)", rule: "invalid YAML: exceeded max depth of 10000"},
		{note: "registry: 100,000-deep JSON", input: "registry", name: "registry.json",
			data: `{"tools": ` + deep(100_000) + `}`,
			ptr:  deepPointer("/tools", maxDepth-1), rule: fmt.Sprintf("nesting deeper than the limit of %d", maxDepth)},
		{note: "registry: a tool that is null", input: "registry",
			data: "tools:\n  - null\n",
			ptr:  "/tools/0", rule: "must be an object, not null"},
		{note: "registry: YAML duplicate key", input: "registry",
			data: "tools:\n  - name: search_docs\n    defer_loading: true\n    defer_loading: false\n",
			ptr:  "/tools/0/defer_loading", rule: `duplicate key "defer_loading" (line 4, column 5)`},
		{note: "registry: YAML duplicate top-level key", input: "registry",
			data: "tools:\n  - name: a\ntools:\n  - name: b\n",
			ptr:  "/tools", rule: `duplicate key "tools" (line 3, column 1)`},
		{note: "registry: JSON truncated", input: "registry", name: "registry.json",
			data: `{"tools": [{"name": "get_time"}`,
			ptr:  "/tools", rule: "invalid JSON: unexpected end of input (expected ',' or ']')"},
		// encoding/json would read both names as "a\ufffdb": the JSON of a
		// registry, a context or approvals is read as a history's is.
		{note: "registry: JSON with a lone surrogate escape", input: "registry", name: "registry.json",
			data: `{"tools": [{"name": "a\udc00b"}]}`, ptr: "/tools/0/name", rule: `invalid JSON: lone UTF-16 surrogate \udc00`},
		{note: "registry: JSON with invalid UTF-8", input: "registry", name: "registry.json",
			data: "{\"tools\": [{\"name\": \"a\xffb\"}]}", ptr: "/tools/0/name", rule: "invalid UTF-8 in string"},
		{note: "registry: JSON trailing garbage", input: "registry", name: "registry.json",
			data: `{"tools": []} []`,
			ptr:  "(root)", rule: "invalid JSON: unexpected data after the document"},
		{note: "registry: JSON duplicate tool names", input: "registry", name: "registry.json",
			data: `{"tools": [{"name": "a"}, {"name": "b"}, {"name": "a"}]}`,
			ptr:  "/tools/2/name", rule: `duplicate tool name "a"`},

		// --- contexts ---
		{note: "context that is not an object", input: "context", data: `["admin"]`,
			ptr: "(root)", rule: "the context must be a JSON object"},
		{note: "context with invalid JSON", input: "context", data: `{"user": }`,
			ptr: "/user", rule: "invalid JSON: unexpected character '}'"},
		{note: "context with a lone surrogate escape", input: "context", data: `{"user": "ana\ud800"}`,
			ptr: "/user", rule: `invalid JSON: lone UTF-16 surrogate \ud800`},
		{note: "context with invalid UTF-8", input: "context", data: "{\"user\": \"an\xe1\"}",
			ptr: "/user", rule: "invalid UTF-8 in string"},
		{note: "context with NaN", input: "context", data: `{"limit": NaN}`,
			ptr: "/limit", rule: "invalid JSON: NaN is not a JSON value"},
		// {"a": [[...]]}: the innermost [] lies inside maxDepth+1 arrays and
		// objects (an empty one adds no level of its own, as in a history).
		{note: "context nested deeper than the limit", input: "context", data: `{"a": ` + deep(maxDepth+1) + `}`,
			ptr: deepPointer("/a", maxDepth-1), rule: fmt.Sprintf("nesting deeper than the limit of %d", maxDepth)},
		{note: "context with trailing garbage", input: "context", data: `{"user": "ana"} {}`,
			ptr: "(root)", rule: "invalid JSON"},

		// --- files, flags, policies ---
		{note: "missing history file", raw: true, args: []string{"--history", "{dir}/nope.json"},
			want: []string{"policycheck: {dir}/nope.json: no such file or directory\n"}},
		{note: "missing registry file", raw: true, args: []string{"--registry", "{dir}/nope.yaml"},
			want: []string{"policycheck: {dir}/nope.yaml: no such file or directory\n"}},
		{note: "missing context file", raw: true, args: []string{"--context", "{dir}/nope.json"},
			want: []string{"policycheck: {dir}/nope.json: no such file or directory\n"}},
		{note: "history that is a directory", raw: true, args: []string{"--history", "{dir}"},
			want: []string{"policycheck: {dir}: is a directory\n"}},
		{note: "registry that is a directory", raw: true, args: []string{"--registry", "{dir}"},
			want: []string{"policycheck: {dir}: is a directory\n"}},
		{note: "empty --registry", raw: true, args: []string{"--registry", ""},
			want: []string{"--registry and --history name files (--history - for stdin); an empty name is not one"}},
		{note: "empty --history", raw: true, args: []string{"--history", ""},
			want: []string{"--registry and --history name files"}},
		{note: "no --registry", raw: true, bare: true, args: []string{"--history", "{dir}/history.json"},
			want: []string{`required flag(s) "registry" not set`}},
		{note: "no flags at all", raw: true, bare: true,
			want: []string{`required flag(s) "history", "registry" not set`}},
		{note: "context from stdin with invalid JSON", raw: true, args: []string{"--context", "-"}, stdin: `{"user": `,
			want: []string{"policycheck: <stdin>: /user: invalid JSON: unexpected end of input"}},
		{note: "history and context both from stdin", raw: true, args: []string{"--history", "-", "--context", "-"}, stdin: validHist,
			want: []string{"--history and --context cannot both read standard input"}},
		{note: "--max-bytes negative", raw: true, args: []string{"--max-bytes", "-5"},
			want: []string{"--max-bytes must be 0 (no limit) or more, not -5"}},
		{note: "unknown flag", raw: true, args: []string{"--histroy", "x"},
			want: []string{"unknown flag: --histroy"}},
		{note: "--max-messages negative", raw: true, args: []string{"--max-messages", "-1"},
			want: []string{"--max-messages must be 0 (no limit; for --max-depth the default) or more, not -1"}},
		{note: "--max-bytes not a number", raw: true, args: []string{"--max-bytes", "lots"},
			want: []string{`invalid argument "lots" for "--max-bytes"`}},
		{note: "a positional argument", raw: true, args: []string{"extra"},
			want: []string{`unexpected argument "extra": policycheck `, ` takes no positional arguments`, `Run 'policycheck `}},
		{note: "--policy file with a Rego syntax error", raw: true, evalOnly: true,
			args: []string{"--policy", filepath.Join("testdata", "policy_syntax", "broken.rego")},
			want: []string{filepath.Join("testdata", "policy_syntax", "broken.rego") + ":5:20: rego_parse_error: unexpected ] token"}},
		{note: "--policy that does not exist", raw: true, evalOnly: true,
			args: []string{"--policy", "{dir}/no-such-policy"},
			want: []string{"{dir}/no-such-policy", "load_error"}},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		if seen[tc.note] {
			t.Fatalf("duplicate note %q", tc.note)
		}
		seen[tc.note] = true
		t.Run(tc.note, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := map[string]string{
				"history":  writeFile(t, dir, "history.json", validHist),
				"registry": writeFile(t, dir, "registry.yaml", goodRegYML),
			}
			if !tc.raw {
				input := tc.input
				if input == "" {
					input = "history"
				}
				name := tc.name
				if name == "" {
					name = map[string]string{"history": "history.json", "registry": "registry.yaml", "context": "context.json"}[input]
				}
				files[input] = writeFile(t, dir, name, tc.data)
			}
			base := []string{"--registry", files["registry"], "--history", files["history"]}
			if tc.bare {
				base = nil
			}
			if f, ok := files["context"]; ok {
				base = append(base, "--context", f)
			}
			extra := make([]string, len(tc.args))
			for i, a := range tc.args {
				extra[i] = strings.ReplaceAll(a, "{dir}", dir)
			}
			cmds := [][]string{{"eval"}, {"facts"}, {"facts", "--format", "input"}, {"explain"}}
			if tc.evalOnly {
				cmds = [][]string{{"eval"}, {"explain"}}
			}
			if !tc.raw && (tc.input == "" || tc.input == "history") {
				// The decoder alone must refuse it too: nothing invalid
				// slips through the path without schema validation.
				cmds = append(cmds, []string{"eval", "--no-schema"})
			}
			var first result
			for i, cmd := range cmds {
				args := append(append(append([]string{}, cmd...), base...), extra...)
				res := run(t, tc.stdin, args...)
				what := strings.Join(cmd, " ")
				if i == 0 {
					first = res
					t.Log(trim(res.stderr))
				} else if res == first {
					continue // the same refusal as eval, already checked
				}
				if res.code != cli.ExitBadUsage {
					t.Errorf("%s: exit status %d, want %d (stderr %q)", what, res.code, cli.ExitBadUsage, res.stderr)
				}
				if res.stdout != "" {
					t.Errorf("%s: stdout not empty on bad input:\n%s", what, trim(res.stdout))
				}
				if strings.Count(strings.TrimSpace(res.stderr), "\n") > 0 && !tc.raw {
					t.Errorf("%s: want a single error line, got:\n%s", what, trim(res.stderr))
				}
				if tc.raw {
					for _, w := range tc.want {
						w = strings.ReplaceAll(w, "{dir}", dir)
						if !strings.Contains(res.stderr, w) {
							t.Errorf("%s: stderr %q does not contain %q", what, trim(res.stderr), w)
						}
					}
					continue
				}
				input := tc.input
				if input == "" {
					input = "history"
				}
				prefix := "policycheck: " + files[input] + ": " + tc.ptr + ": "
				if !strings.HasPrefix(res.stderr, prefix) {
					t.Errorf("%s: stderr does not name file and pointer\n got: %s\nwant prefix: %s", what, trim(res.stderr), prefix)
				} else if !strings.Contains(res.stderr[len(prefix):], tc.rule) {
					t.Errorf("%s: stderr does not state the rule\n got: %s\nwant: %s", what, trim(res.stderr), tc.rule)
				}
			}
		})
	}
	if len(tests) < 40 {
		t.Errorf("only %d bad inputs; the contract is at least 40", len(tests))
	}
}

// trim shortens very long outputs (pointers 128 levels deep) in messages.
func trim(s string) string {
	if len(s) > 600 {
		return s[:300] + " … " + s[len(s)-300:]
	}
	return s
}

// TestStrayDataInAPolicyDirectory: a JSON file in a policy directory that
// the bundle convention does not name as data is refused by eval and by
// check, with its path, rather than read by eval and unseen by
// policycheck test and bundles.
func TestStrayDataInAPolicyDirectory(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "pol")
	if err := os.MkdirAll(pol, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, pol, "limits.rego", "package policycheck.rules.limits\n\ndeny contains \"over\" if input.call.args.n > data.limits.n\n")
	writeFile(t, pol, "limits.json", `{"limits": {"n": 3}}`)
	reg := writeFile(t, dir, "registry.yaml", goodRegYML)
	h := writeFile(t, dir, "history.json", hist(req(userPrompt), resp(callTime)))
	for _, args := range [][]string{
		{"eval", "--registry", reg, "--history", h, "--policy", pol},
		{"check", pol, "--registry", reg},
	} {
		r := run(t, "", args...)
		if r.code != cli.ExitBadUsage {
			t.Fatalf("%s: exit %d, want %d\n%s%s", args[0], r.code, cli.ExitBadUsage, r.stdout, r.stderr)
		}
		out := r.stdout + r.stderr
		if !strings.Contains(out, filepath.Join(pol, "limits.json")) || !strings.Contains(out, "not loaded as data") {
			t.Errorf("%s does not name the stray data file:\n%s", args[0], out)
		}
	}
}

// TestPolicyDirectoryWithTheProjectsOtherFiles: the layout a new project
// starts with, policies, a registry, a context and histories in one
// folder, passed as the policy directory. check and eval each say so in
// one finding, on one line of reasonable length, naming a few of the
// files and what to do; not one finding per file on one line.
func TestPolicyDirectoryWithTheProjectsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	// The rule reads its argument guarded (check's args_not_required
	// finding is not what this test is about).
	writeFile(t, dir, "limits.rego", "package policycheck.rules.limits\n\ndeny contains \"over\" if object.get(input.call.args, \"n\", 4) > 3\n")
	reg := writeFile(t, dir, "registry.yaml", goodRegYML)
	writeFile(t, dir, "context.json", `{"group": "admin"}`)
	if err := os.MkdirAll(filepath.Join(dir, "histories"), 0o755); err != nil {
		t.Fatal(err)
	}
	var h string
	for _, name := range []string{"a.json", "b.json", "c.json", "d.json"} {
		h = writeFile(t, filepath.Join(dir, "histories"), name, hist(req(userPrompt), resp(callTime)))
	}
	for _, args := range [][]string{
		{"eval", "--registry", reg, "--history", h, "--policy", dir},
		{"check", dir, "--registry", reg},
	} {
		r := run(t, "", args...)
		if r.code != cli.ExitBadUsage {
			t.Fatalf("%s: exit %d, want %d\n%s%s", args[0], r.code, cli.ExitBadUsage, r.stdout, r.stderr)
		}
		out := r.stdout + r.stderr
		var findings []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if len(line) > 600 {
				t.Errorf("%s: a line of %d characters:\n%s", args[0], len(line), line)
			}
			if strings.Contains(line, "not data") {
				findings = append(findings, line)
			}
		}
		if len(findings) != 1 {
			t.Fatalf("%s: want one finding about the files that are not data, got %d:\n%s", args[0], len(findings), out)
		}
		for _, want := range []string{"6 JSON or YAML files here are not data", "context.json", "histories/a.json", "and 3 more", "directory of their own"} {
			if !strings.Contains(findings[0], want) {
				t.Errorf("%s: the finding lacks %q:\n%s", args[0], want, findings[0])
			}
		}
	}
}

// TestPolicyProblemsOneALine: eval with a policy set of several problems
// writes each on a line of its own, not all on one.
func TestPolicyProblemsOneALine(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "pol")
	if err := os.MkdirAll(pol, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, pol, "a.rego", "package policycheck.rules.a\n\nhide contains z\n")
	writeFile(t, pol, "b.rego", "package policycheck.rules.b\n\nhide contains y\n")
	reg := writeFile(t, dir, "registry.yaml", goodRegYML)
	h := writeFile(t, dir, "history.json", hist(req(userPrompt), resp(callTime)))
	r := run(t, "", "eval", "--registry", reg, "--history", h, "--policy", pol)
	if r.code != cli.ExitBadUsage {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "policycheck: policy: ") || !strings.HasPrefix(lines[1], "policy: ") {
		t.Errorf("want one problem a line:\n%s", r.stderr)
	}
}
