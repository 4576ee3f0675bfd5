package loader_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/loader"
)

// req, resp and hist build history documents from JSON fragments.
func req(parts ...string) string {
	return `{"kind": "request", "parts": [` + strings.Join(parts, ", ") + `]}`
}

func resp(parts ...string) string {
	return `{"kind": "response", "parts": [` + strings.Join(parts, ", ") + `]}`
}

func hist(msgs ...string) string { return "[" + strings.Join(msgs, ", ") + "]" }

func decode(t *testing.T, src string) any {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	require.NoError(t, err, "test document is not JSON: %s", src)
	return doc
}

// Parts used by several cases.
const (
	searchCall       = `{"part_kind": "tool-call", "tool_kind": "tool-search", "tool_name": "search_tools", "args": {"queries": ["weather"]}, "tool_call_id": "s1"}`
	searchReturn     = `{"part_kind": "tool-return", "tool_kind": "tool-search", "tool_name": "search_tools", "content": {"discovered_tools": [{"name": "get_forecast"}]}, "tool_call_id": "s1"}`
	nativeCall       = `{"part_kind": "builtin-tool-call", "tool_kind": "tool-search", "tool_name": "tool_search", "args": {"queries": ["stock"]}, "tool_call_id": "n1", "provider_name": "anthropic"}`
	nativeReturn     = `{"part_kind": "builtin-tool-return", "tool_kind": "tool-search", "tool_name": "tool_search", "content": {"discovered_tools": [{"name": "stock_price"}]}, "tool_call_id": "n1", "provider_name": "anthropic", "provider_details": null}`
	loadCall         = `{"part_kind": "tool-call", "tool_kind": "capability-load", "tool_name": "load_capability", "args": {"id": "refunds"}, "tool_call_id": "l1"}`
	loadReturn       = `{"part_kind": "tool-return", "tool_kind": "capability-load", "tool_name": "load_capability", "content": {"instructions": "Follow the refund policy."}, "tool_call_id": "l1"}`
	plainCall        = `{"part_kind": "tool-call", "tool_name": "get_weather", "args": {"city": "Paris"}, "tool_call_id": "c1", "tool_kind": null, "id": null, "provider_name": null, "provider_details": null}`
	plainReturn      = `{"part_kind": "tool-return", "tool_name": "get_weather", "content": "sunny", "tool_call_id": "c1", "tool_kind": null, "metadata": null, "timestamp": "2026-01-02T03:04:05Z", "outcome": "success"}`
	userPrompt       = `{"part_kind": "user-prompt", "content": "hi"}`
	textPart         = `{"part_kind": "text", "content": "hello"}`
	deltaPart        = `{"part_kind": "tool-availability-delta", "tools_added": ["get_forecast"], "tool_call_id": "c1"}`
	builtinLoadCall  = `{"part_kind": "builtin-tool-call", "tool_kind": "capability-load", "tool_name": "anything", "args": {"name": 5}}`
	builtinLoadRetrn = `{"part_kind": "builtin-tool-return", "tool_kind": "capability-load", "tool_name": "anything", "content": "not an object"}`
)

func TestHistorySchema(t *testing.T) {
	cases := []struct {
		note    string
		doc     string
		valid   bool
		pointer string // for invalid documents: SchemaError.Pointer ("" is the root)
		msg     string // optional: a substring of SchemaError.Msg
	}{
		// --- valid ---
		{note: "empty history", doc: `[]`, valid: true},
		{note: "every request part kind", valid: true, doc: hist(req(
			`{"part_kind": "system-prompt", "content": "be nice", "timestamp": null, "dynamic_ref": "r"}`,
			`{"part_kind": "user-prompt", "content": "hi", "timestamp": "2026-01-02T03:04:05Z"}`,
			`{"part_kind": "user-prompt", "content": ["hi", {"kind": "image-url", "url": "x"}], "timestamp": 1767322245}`,
			`{"part_kind": "speech", "whatever": [1, 2]}`,
			plainReturn,
			`{"part_kind": "retry-prompt", "content": "Unknown tool name: 'x'.", "tool_name": "x", "tool_call_id": "x1", "timestamp": "2026-01-02T03:04:05Z"}`,
			`{"part_kind": "retry-prompt", "content": [{"type": "missing", "loc": ["a"], "msg": "m", "input": {}}], "tool_name": null}`,
			deltaPart,
		))},
		{note: "every response part kind", valid: true, doc: hist(resp(
			`{"part_kind": "text", "content": "hello", "id": null, "provider_name": "openai", "provider_details": {"a": 1}}`,
			`{"part_kind": "thinking", "content": "hmm", "id": "t1", "signature": "sig", "provider_name": null, "provider_details": null}`,
			`{"part_kind": "compaction"}`,
			`{"part_kind": "file", "content": {"data": "AAAA"}}`,
			`{"part_kind": "speech"}`,
			plainCall,
			`{"part_kind": "builtin-tool-call", "tool_name": "web_search", "args": {"q": "x"}, "tool_call_id": "w1", "tool_kind": null, "id": null, "provider_name": "openai", "provider_details": null}`,
			`{"part_kind": "builtin-tool-return", "tool_name": "web_search", "content": {"r": 1}, "tool_call_id": "w1", "tool_kind": null, "metadata": null, "timestamp": "2026-01-02T03:04:05Z", "outcome": "success", "provider_name": "openai", "provider_details": null}`,
		))},
		{note: "request envelope with every key", valid: true, doc: `[{"parts": [], "timestamp": 1767322245.5, "instructions": null, "kind": "request", "run_id": "run-1", "conversation_id": null, "metadata": {"k": "v"}, "state": "interrupted"}]`},
		{note: "response envelope with every key and input aliases", valid: true, doc: `[{"parts": [], "usage": {"requests": 1}, "model_name": "gpt", "timestamp": "2026-01-02T03:04:05+02:00", "kind": "response", "provider_name": "openai", "provider_url": null, "vendor_details": {"x": 1}, "vendor_id": "r1", "finish_reason": "tool_call", "run_id": null, "conversation_id": "conv-1", "metadata": null, "state": "suspended"}]`},
		{note: "response finish_reason null and state incomplete", valid: true, doc: `[{"kind": "response", "parts": [], "finish_reason": null, "state": "incomplete", "provider_details": null, "provider_response_id": null}]`},
		{note: "unknown extra keys on messages and parts are ignored", valid: true, doc: `[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi", "zzz": {"deep": [1]}}], "extra": true}]`},
		{note: "plain tool-call with string args, null args and missing args", valid: true, doc: hist(resp(
			`{"part_kind": "tool-call", "tool_name": "a", "args": "{\"city\": \"Paris\"}"}`,
			`{"part_kind": "tool-call", "tool_name": "b", "args": null}`,
			`{"part_kind": "tool-call", "tool_name": "c"}`,
		))},
		{note: "tool-return content may be null and metadata anything", valid: true, doc: hist(req(
			`{"part_kind": "tool-return", "tool_name": "a", "content": null, "metadata": [1, "x"], "outcome": "denied"}`,
		))},
		{note: "legacy search return is an ordinary part", valid: true, doc: hist(req(
			`{"tool_name": "search_tools", "content": "Found legacy", "tool_call_id": "leg1", "tool_kind": null, "metadata": {"discovered_tools": ["legacy_tool"]}, "outcome": "success", "part_kind": "tool-return"}`,
		))},
		{note: "name collisions without tool_kind are ordinary parts", valid: true, doc: hist(
			resp(`{"part_kind": "tool-call", "tool_name": "load_capability", "args": {"name": 5}}`),
			req(`{"part_kind": "tool-return", "tool_name": "search_tools", "content": "x"}`),
		)},
		{note: "typed search exchange", valid: true, doc: hist(resp(searchCall), req(searchReturn, deltaPart))},
		{note: "typed search call: args as an arbitrary string, no tool_name", valid: true, doc: hist(resp(
			`{"part_kind": "tool-call", "tool_kind": "tool-search", "args": "garbage"}`,
		))},
		{note: "typed search call: args null, extra keys in args", valid: true, doc: hist(resp(
			`{"part_kind": "tool-call", "tool_kind": "tool-search", "tool_name": "search_tools", "args": null}`,
			`{"part_kind": "tool-call", "tool_kind": "tool-search", "args": {"queries": [], "limit": 3}}`,
		))},
		{note: "typed search return with extra keys and a message", valid: true, doc: hist(req(
			`{"part_kind": "tool-return", "tool_kind": "tool-search", "content": {"discovered_tools": [{"name": "a", "description": "d"}, {"name": "b", "score": 1}], "message": "found 2", "extra": null}}`,
		))},
		{note: "native search call and return in one response", valid: true, doc: hist(resp(nativeCall, nativeReturn))},
		{note: "native search return with no tool_name and an empty match list", valid: true, doc: hist(resp(
			`{"part_kind": "builtin-tool-return", "tool_kind": "tool-search", "content": {"discovered_tools": []}}`,
		))},
		{note: "typed load exchange", valid: true, doc: hist(resp(loadCall), req(loadReturn, deltaPart))},
		{note: "typed load call: args a string that is not valid load args", valid: true, doc: hist(resp(
			`{"part_kind": "tool-call", "tool_kind": "capability-load", "args": "{\"id\":5}"}`,
			`{"part_kind": "tool-call", "tool_kind": "capability-load", "tool_name": "load_capability", "args": null}`,
			`{"part_kind": "tool-call", "tool_kind": "capability-load", "args": {"id": "x", "why": "because"}}`,
		))},
		{note: "typed load return: content {} and content with extra keys", valid: true, doc: hist(req(
			`{"part_kind": "tool-return", "tool_kind": "capability-load", "tool_name": "load_capability", "content": {}}`,
			`{"part_kind": "tool-return", "tool_kind": "capability-load", "content": {"instructions": "hi", "other": [1]}}`,
		))},
		{note: "builtin capability-load parts are plain parts", valid: true, doc: hist(resp(builtinLoadCall, builtinLoadRetrn))},
		{note: "delta with the legacy added key only", valid: true, doc: hist(req(`{"part_kind": "tool-availability-delta", "added": ["legacy_name"]}`))},
		{note: "delta with both keys: added is ignored whatever it holds", valid: true, doc: hist(req(
			`{"part_kind": "tool-availability-delta", "tools_added": ["a"], "added": null}`,
			`{"part_kind": "tool-availability-delta", "tools_added": [], "added": [1, {"x": 2}]}`,
		))},
		{note: "delta with no names at all", valid: true, doc: hist(req(`{"part_kind": "tool-availability-delta", "tool_call_id": null}`))},
		{note: "compaction with provider details", valid: true, doc: hist(resp(
			`{"content": null, "id": "cmp_1", "provider_name": "openai", "provider_details": {"encrypted_content": "gAAA"}, "part_kind": "compaction"}`,
		))},

		// --- invalid: envelope ---
		{note: "root is not an array", doc: `{"kind": "request"}`, pointer: "", msg: "must be an array, not an object"},
		{note: "message is not an object", doc: `[[]]`, pointer: "/0", msg: "must be an object"},
		{note: "message without kind", doc: `[{"parts": []}]`, pointer: "/0", msg: `missing required key "kind"`},
		{note: "unknown message kind", doc: `[{"kind": "system", "parts": []}]`, pointer: "/0/kind", msg: `"system" is not one of "request", "response"`},
		{note: "message without parts", doc: `[{"kind": "response"}]`, pointer: "/0", msg: `missing required key "parts"`},
		{note: "parts is not an array", doc: `[{"kind": "request", "parts": {}}]`, pointer: "/0/parts", msg: "must be an array"},
		{note: "request timestamp boolean", doc: `[{"kind": "request", "parts": [], "timestamp": true}]`, pointer: "/0/timestamp", msg: "must be a string, a number or null, not a boolean"},
		{note: "request instructions number", doc: `[{"kind": "request", "parts": [], "instructions": 1}]`, pointer: "/0/instructions"},
		{note: "request run_id number", doc: `[{"kind": "request", "parts": [], "run_id": 1}]`, pointer: "/0/run_id"},
		{note: "request metadata array", doc: `[{"kind": "request", "parts": [], "metadata": []}]`, pointer: "/0/metadata"},
		{note: "request state of a response", doc: `[{"kind": "request", "parts": [], "state": "incomplete"}]`, pointer: "/0/state", msg: `"incomplete" is not one of "complete", "interrupted"`},
		{note: "response usage null", doc: `[{"kind": "response", "parts": [], "usage": null}]`, pointer: "/0/usage", msg: "must be an object, not null"},
		{note: "response model_name number", doc: `[{"kind": "response", "parts": [], "model_name": 4}]`, pointer: "/0/model_name"},
		{note: "response provider_name number", doc: `[{"kind": "response", "parts": [], "provider_name": 4}]`, pointer: "/0/provider_name"},
		{note: "response vendor_details string", doc: `[{"kind": "response", "parts": [], "vendor_details": "x"}]`, pointer: "/0/vendor_details"},
		{note: "response vendor_id number", doc: `[{"kind": "response", "parts": [], "vendor_id": 1}]`, pointer: "/0/vendor_id"},
		{note: "response finish_reason unknown", doc: `[{"kind": "response", "parts": [], "finish_reason": "done"}]`, pointer: "/0/finish_reason"},
		{note: "response state unknown", doc: `[{"kind": "response", "parts": [], "state": "zzz"}]`, pointer: "/0/state"},
		{note: "response timestamp object", doc: `[{"kind": "response", "parts": [], "timestamp": {}}]`, pointer: "/0/timestamp"},

		// --- invalid: part kinds ---
		{note: "part is not an object", doc: hist(req(`"hi"`)), pointer: "/0/parts/0", msg: "must be an object, not a string"},
		{note: "part without part_kind", doc: hist(req(`{"content": "hi"}`)), pointer: "/0/parts/0", msg: `missing required key "part_kind"`},
		{note: "unknown part_kind", doc: hist(req(userPrompt, `{"part_kind": "image"}`)), pointer: "/0/parts/1/part_kind", msg: `unknown part_kind "image"`},
		{note: "part_kind not a string", doc: hist(resp(`{"part_kind": 3}`)), pointer: "/0/parts/0/part_kind", msg: "part_kind must be a string"},
		{note: "tool-call in a request", doc: hist(req(userPrompt, plainCall)), pointer: "/0/parts/1/part_kind", msg: `"tool-call" is not allowed in a request`},
		{note: "compaction in a request", doc: hist(req(`{"part_kind": "compaction"}`)), pointer: "/0/parts/0/part_kind", msg: `"compaction" is not allowed in a request`},
		{note: "tool-return in a response", doc: hist(resp(plainReturn)), pointer: "/0/parts/0/part_kind", msg: `"tool-return" is not allowed in a response`},
		{note: "delta in a response", doc: hist(req(userPrompt), resp(textPart, deltaPart)), pointer: "/1/parts/1/part_kind", msg: `"tool-availability-delta" is not allowed in a response`},

		// --- invalid: plain part fields ---
		{note: "system-prompt without content", doc: hist(req(`{"part_kind": "system-prompt"}`)), pointer: "/0/parts/0", msg: `missing required key "content"`},
		{note: "system-prompt dynamic_ref number", doc: hist(req(`{"part_kind": "system-prompt", "content": "x", "dynamic_ref": 1}`)), pointer: "/0/parts/0/dynamic_ref"},
		{note: "user-prompt content object", doc: hist(req(`{"part_kind": "user-prompt", "content": {}}`)), pointer: "/0/parts/0/content", msg: "must be a string or an array, not an object"},
		{note: "user-prompt timestamp boolean", doc: hist(req(`{"part_kind": "user-prompt", "content": "x", "timestamp": false}`)), pointer: "/0/parts/0/timestamp"},
		{note: "text content null", doc: hist(resp(`{"part_kind": "text", "content": null}`)), pointer: "/0/parts/0/content", msg: "must be a string, not null"},
		{note: "text without content", doc: hist(resp(`{"part_kind": "text"}`)), pointer: "/0/parts/0"},
		{note: "thinking signature number", doc: hist(resp(`{"part_kind": "thinking", "content": "x", "signature": 1}`)), pointer: "/0/parts/0/signature"},
		{note: "compaction content number", doc: hist(resp(`{"part_kind": "compaction", "content": 5}`)), pointer: "/0/parts/0/content"},
		{note: "compaction provider_details string", doc: hist(resp(`{"part_kind": "compaction", "provider_details": "x"}`)), pointer: "/0/parts/0/provider_details"},
		{note: "plain tool-call without tool_name", doc: hist(resp(`{"part_kind": "tool-call", "args": {}}`)), pointer: "/0/parts/0", msg: `missing required key "tool_name" (required when tool_kind is absent or null)`},
		{note: "tool-call with null tool_kind needs tool_name", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": null}`)), pointer: "/0/parts/0"},
		{note: "builtin-tool-call without tool_name", doc: hist(resp(`{"part_kind": "builtin-tool-call"}`)), pointer: "/0/parts/0"},
		{note: "builtin capability-load call is plain: needs tool_name", doc: hist(resp(`{"part_kind": "builtin-tool-call", "tool_kind": "capability-load", "args": {"id": "x"}}`)), pointer: "/0/parts/0", msg: `missing required key "tool_name" (required unless tool_kind is "tool-search")`},
		{note: "builtin capability-load return is plain: needs tool_name", doc: hist(resp(`{"part_kind": "builtin-tool-return", "tool_kind": "capability-load", "content": {}}`)), pointer: "/0/parts/0"},
		{note: "tool-call tool_name null", doc: hist(resp(`{"part_kind": "tool-call", "tool_name": null}`)), pointer: "/0/parts/0/tool_name"},
		{note: "tool-call args number", doc: hist(resp(`{"part_kind": "tool-call", "tool_name": "a", "args": 5}`)), pointer: "/0/parts/0/args", msg: "must be a string, an object or null, not a number"},
		{note: "tool-call tool_call_id null", doc: hist(resp(`{"part_kind": "tool-call", "tool_name": "a", "tool_call_id": null}`)), pointer: "/0/parts/0/tool_call_id"},
		{note: "tool-call provider_details array", doc: hist(resp(`{"part_kind": "tool-call", "tool_name": "a", "provider_details": []}`)), pointer: "/0/parts/0/provider_details"},
		{note: "unknown tool_kind", doc: hist(resp(`{"part_kind": "tool-call", "tool_name": "a", "tool_kind": "mcp_server"}`)), pointer: "/0/parts/0/tool_kind", msg: `"mcp_server" is not one of null, "tool-search", "capability-load"`},
		{note: "unknown tool_kind on a builtin return", doc: hist(resp(`{"part_kind": "builtin-tool-return", "tool_name": "a", "content": 1, "tool_kind": "x"}`)), pointer: "/0/parts/0/tool_kind"},
		{note: "tool-return without content", doc: hist(req(`{"part_kind": "tool-return", "tool_name": "a"}`)), pointer: "/0/parts/0", msg: `missing required key "content"`},
		{note: "tool-return without tool_name", doc: hist(req(`{"part_kind": "tool-return", "content": 1}`)), pointer: "/0/parts/0"},
		{note: "tool-return outcome unknown", doc: hist(req(`{"part_kind": "tool-return", "tool_name": "a", "content": 1, "outcome": "ok"}`)), pointer: "/0/parts/0/outcome"},
		{note: "tool-return timestamp object", doc: hist(req(`{"part_kind": "tool-return", "tool_name": "a", "content": 1, "timestamp": {}}`)), pointer: "/0/parts/0/timestamp"},
		{note: "tool-return tool_call_id number", doc: hist(req(`{"part_kind": "tool-return", "tool_name": "a", "content": 1, "tool_call_id": 7}`)), pointer: "/0/parts/0/tool_call_id"},
		{note: "builtin-tool-return provider_name number", doc: hist(resp(`{"part_kind": "builtin-tool-return", "tool_name": "a", "content": 1, "provider_name": 5}`)), pointer: "/0/parts/0/provider_name"},
		{note: "retry-prompt without content", doc: hist(req(`{"part_kind": "retry-prompt", "tool_name": "x"}`)), pointer: "/0/parts/0"},
		{note: "retry-prompt tool_name number", doc: hist(req(`{"part_kind": "retry-prompt", "content": "x", "tool_name": 1}`)), pointer: "/0/parts/0/tool_name"},
		{note: "retry-prompt tool_call_id null", doc: hist(req(`{"part_kind": "retry-prompt", "content": "x", "tool_call_id": null}`)), pointer: "/0/parts/0/tool_call_id"},
		{note: "delta tools_added null", doc: hist(req(`{"part_kind": "tool-availability-delta", "tools_added": null}`)), pointer: "/0/parts/0/tools_added", msg: "must be an array, not null"},
		{note: "delta tools_added with a number", doc: hist(req(`{"part_kind": "tool-availability-delta", "tools_added": ["a", 1]}`)), pointer: "/0/parts/0/tools_added/1", msg: "must be a string, not a number"},
		{note: "delta legacy added null", doc: hist(req(`{"part_kind": "tool-availability-delta", "added": null}`)), pointer: "/0/parts/0/added"},
		{note: "delta legacy added with a number", doc: hist(req(`{"part_kind": "tool-availability-delta", "added": ["a", 2]}`)), pointer: "/0/parts/0/added/1"},
		{note: "delta tool_call_id number", doc: hist(req(`{"part_kind": "tool-availability-delta", "tool_call_id": 5}`)), pointer: "/0/parts/0/tool_call_id"},

		// --- invalid: typed parts ---
		{note: "typed search call named find", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "tool-search", "tool_name": "find", "args": null}`)), pointer: "/0/parts/0/tool_name", msg: `must be "search_tools" when tool_kind is "tool-search"`},
		{note: "typed search call args {}", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "tool-search", "args": {}}`)), pointer: "/0/parts/0/args", msg: `missing required key "queries" (tool-search args are`},
		{note: "typed search call queries a string", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "tool-search", "args": {"queries": "x"}}`)), pointer: "/0/parts/0/args/queries", msg: "must be an array, not a string"},
		{note: "typed search call queries with a number", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "tool-search", "args": {"queries": ["a", 1]}}`)), pointer: "/0/parts/0/args/queries/1"},
		{note: "typed search call args a number", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "tool-search", "args": 1}`)), pointer: "/0/parts/0/args"},
		{note: "native search call named search_tools", doc: hist(resp(`{"part_kind": "builtin-tool-call", "tool_kind": "tool-search", "tool_name": "search_tools"}`)), pointer: "/0/parts/0/tool_name", msg: `must be "tool_search"`},
		{note: "native search call args {}", doc: hist(resp(`{"part_kind": "builtin-tool-call", "tool_kind": "tool-search", "args": {}}`)), pointer: "/0/parts/0/args"},
		{note: "typed search return content without discovered_tools", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "tool-search", "content": {"tools": []}}`)), pointer: "/0/parts/0/content", msg: `missing required key "discovered_tools"`},
		{note: "typed search return content a string", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "tool-search", "content": "{\"discovered_tools\": []}"}`)), pointer: "/0/parts/0/content", msg: "must be an object, not a string"},
		{note: "typed search return match without name", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "tool-search", "content": {"discovered_tools": [{"name": "a"}, {"title": "b"}]}}`)), pointer: "/0/parts/0/content/discovered_tools/1"},
		{note: "typed search return match a string", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "tool-search", "content": {"discovered_tools": ["a"]}}`)), pointer: "/0/parts/0/content/discovered_tools/0"},
		{note: "typed search return message number", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "tool-search", "content": {"discovered_tools": [], "message": 1}}`)), pointer: "/0/parts/0/content/message"},
		{note: "typed search return named tool_search", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "tool-search", "tool_name": "tool_search", "content": {"discovered_tools": []}}`)), pointer: "/0/parts/0/tool_name"},
		{note: "native search return match name number", doc: hist(resp(`{"part_kind": "builtin-tool-return", "tool_kind": "tool-search", "content": {"discovered_tools": [{"name": 5}]}}`)), pointer: "/0/parts/0/content/discovered_tools/0/name"},
		{note: "native search return named search_tools", doc: hist(resp(`{"part_kind": "builtin-tool-return", "tool_kind": "tool-search", "tool_name": "search_tools", "content": {"discovered_tools": []}}`)), pointer: "/0/parts/0/tool_name"},
		{note: "native search return content null", doc: hist(resp(`{"part_kind": "builtin-tool-return", "tool_kind": "tool-search", "content": null}`)), pointer: "/0/parts/0/content"},
		{note: "typed load call named load", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "capability-load", "tool_name": "load", "args": {"id": "x"}}`)), pointer: "/0/parts/0/tool_name", msg: `must be "load_capability" when tool_kind is "capability-load"`},
		{note: "typed load call args id a number", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "capability-load", "args": {"id": 5}}`)), pointer: "/0/parts/0/args/id", msg: "must be a string, not a number (capability-load args are"},
		{note: "typed load call args without id", doc: hist(resp(`{"part_kind": "tool-call", "tool_kind": "capability-load", "args": {"name": "x"}}`)), pointer: "/0/parts/0/args", msg: `missing required key "id"`},
		{note: "typed load return content a JSON string", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "capability-load", "content": "{\"instructions\": \"hi\"}"}`)), pointer: "/0/parts/0/content", msg: "must be an object, not a string (capability-load content"},
		{note: "typed load return instructions number", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "capability-load", "content": {"instructions": 5}}`)), pointer: "/0/parts/0/content/instructions"},
		{note: "typed load return named search_tools", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "capability-load", "tool_name": "search_tools", "content": {}}`)), pointer: "/0/parts/0/tool_name"},
		{note: "typed load return without content", doc: hist(req(`{"part_kind": "tool-return", "tool_kind": "capability-load"}`)), pointer: "/0/parts/0", msg: `missing required key "content"`},
		{note: "error deep in a later message", doc: hist(resp(searchCall), req(searchReturn), resp(textPart, `{"part_kind": "tool-call", "tool_kind": "capability-load", "args": {"id": ["x"]}}`)), pointer: "/2/parts/1/args/id"},
	}

	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			err := loader.ValidateHistorySchema("run.json", decode(t, tc.doc))
			// The decoder, the only validator a request meets by
			// default, judges every case as the schema does, at the
			// same JSON pointer.
			_, decErr := loader.DecodeHistory("run.json", []byte(tc.doc), loader.DefaultLimits())
			if tc.valid {
				require.NoError(t, err)
				require.NoError(t, decErr, "the decoder rejects what the schema accepts")
				return
			}
			var le *loader.Error
			require.True(t, errors.As(decErr, &le), "the decoder accepts what the schema rejects (%v)", err)
			require.Equal(t, tc.pointer, le.Pointer, "decoder: %v", decErr)
			require.Error(t, err)
			t.Log(err)
			var serr *loader.SchemaError
			require.True(t, errors.As(err, &serr), "want *loader.SchemaError, got %T: %v", err, err)
			require.Equal(t, "run.json", serr.File)
			require.Equal(t, tc.pointer, serr.Pointer, "msg: %s", serr.Msg)
			require.Contains(t, serr.Msg, tc.msg)
			require.NotEmpty(t, serr.Msg)
		})
	}
}

// TestHistorySchemaDecodedWithEncodingJSON checks that float64 numbers (as
// encoding/json decodes them) are accepted as well as json.Number.
func TestHistorySchemaDecodedWithEncodingJSON(t *testing.T) {
	var doc any
	require.NoError(t, json.Unmarshal([]byte(`[{"kind": "request", "parts": [], "timestamp": 1767322245}]`), &doc))
	require.NoError(t, loader.ValidateHistorySchema("run.json", doc))
}

func TestRegistrySchema(t *testing.T) {
	cases := []struct {
		note    string
		doc     string
		valid   bool
		pointer string
		msg     string
	}{
		{note: "empty registry", doc: `{}`, valid: true},
		{note: "full registry", valid: true, doc: `{
			"capabilities": [{"id": "vault", "defer_loading": true, "description": "Secrets runbook"}, {"id": "misc"}],
			"tools": [
				{"name": "get_time"},
				{"name": "search_docs", "defer_loading": true, "description": "d", "max_retries": 0},
				{"name": "secret_op", "capability": "vault", "max_retries": 3},
				{"name": "free", "capability": null}
			]}`},
		{note: "not an object", doc: `[]`, pointer: "", msg: "must be an object, not an array"},
		{note: "unknown top-level key", doc: `{"tools": [], "extra": 1}`, pointer: "/extra", msg: `unknown key "extra"`},
		{note: "capabilities not an array", doc: `{"capabilities": {}}`, pointer: "/capabilities"},
		{note: "capability without id", doc: `{"capabilities": [{"defer_loading": true}]}`, pointer: "/capabilities/0", msg: `missing required key "id"`},
		{note: "capability with empty id", doc: `{"capabilities": [{"id": ""}]}`, pointer: "/capabilities/0/id", msg: "must not be empty"},
		{note: "capability with unknown key", doc: `{"capabilities": [{"id": "a", "tools": []}]}`, pointer: "/capabilities/0/tools"},
		{note: "capability defer_loading a string", doc: `{"capabilities": [{"id": "a", "defer_loading": "yes"}]}`, pointer: "/capabilities/0/defer_loading", msg: "must be a boolean, not a string"},
		{note: "tool without name", doc: `{"tools": [{"capability": "a"}]}`, pointer: "/tools/0"},
		{note: "tool name a number", doc: `{"tools": [{"name": 1}]}`, pointer: "/tools/0/name"},
		{note: "tool with empty name", doc: `{"tools": [{"name": ""}]}`, pointer: "/tools/0/name"},
		{note: "tool capability a number", doc: `{"tools": [{"name": "a", "capability": 1}]}`, pointer: "/tools/0/capability"},
		{note: "tool negative max_retries", doc: `{"tools": [{"name": "a", "max_retries": -1}]}`, pointer: "/tools/0/max_retries", msg: "must be >= 0"},
		{note: "tool fractional max_retries", doc: `{"tools": [{"name": "a", "max_retries": 1.5}]}`, pointer: "/tools/0/max_retries", msg: "must be an integer"},
		{note: "tool with unknown key", doc: `{"tools": [{"name": "a", "deferred": true}]}`, pointer: "/tools/0/deferred", msg: `unknown key "deferred"`},
		{note: "tool description a number", doc: `{"tools": [{"name": "a", "description": 1}]}`, pointer: "/tools/0/description"},
		{note: "labels", valid: true, doc: `{"capabilities": [{"id": "v", "labels": ["secret"]}], "tools": [{"name": "a", "capability": "v", "labels": ["external", "secret"]}]}`},
		{note: "tool labels a string", doc: `{"tools": [{"name": "a", "labels": "secret"}]}`, pointer: "/tools/0/labels", msg: "must be an array, not a string"},
		{note: "tool label a number", doc: `{"tools": [{"name": "a", "labels": ["ok", 7]}]}`, pointer: "/tools/0/labels/1", msg: "must be a string, not a number"},
		{note: "tool label empty", doc: `{"tools": [{"name": "a", "labels": [""]}]}`, pointer: "/tools/0/labels/0", msg: "must not be empty"},
		{note: "capability labels an object", doc: `{"capabilities": [{"id": "v", "labels": {"secret": true}}]}`, pointer: "/capabilities/0/labels", msg: "must be an array, not an object"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			err := loader.ValidateRegistrySchema("tools.yaml", decode(t, tc.doc))
			if tc.valid {
				require.NoError(t, err)
				return
			}
			var serr *loader.SchemaError
			require.True(t, errors.As(err, &serr), "want *loader.SchemaError, got %T: %v", err, err)
			require.Equal(t, tc.pointer, serr.Pointer, "msg: %s", serr.Msg)
			require.Contains(t, serr.Msg, tc.msg)
		})
	}
}

// TestRegistrySchemaYAMLIntegers checks Go ints, as YAML decoders produce them.
func TestRegistrySchemaYAMLIntegers(t *testing.T) {
	doc := map[string]any{"tools": []any{map[string]any{"name": "a", "max_retries": 2}}}
	require.NoError(t, loader.ValidateRegistrySchema("tools.yaml", doc))
	doc = map[string]any{"tools": []any{map[string]any{"name": "a", "max_retries": -2}}}
	require.Error(t, loader.ValidateRegistrySchema("tools.yaml", doc))
}

func TestSchemaErrorRendering(t *testing.T) {
	require.Equal(t, "run.json: /3/parts/1/part_kind: bad",
		(&loader.SchemaError{File: "run.json", Pointer: "/3/parts/1/part_kind", Msg: "bad"}).Error())
	require.Equal(t, "run.json: (root): must be an array, not an object",
		loader.ValidateHistorySchema("run.json", map[string]any{}).Error())
}

func TestSchemaPointerEscaping(t *testing.T) {
	doc := map[string]any{"tools": []any{map[string]any{"name": "a", "a/b~c": 1}}}
	err := loader.ValidateRegistrySchema("tools.yaml", doc)
	var serr *loader.SchemaError
	require.True(t, errors.As(err, &serr))
	require.Equal(t, "/tools/0/a~1b~0c", serr.Pointer)
}

func TestEmbeddedSchemasAreJSON(t *testing.T) {
	for name, b := range map[string][]byte{"history": loader.HistorySchema(), "registry": loader.RegistrySchema()} {
		var v map[string]any
		require.NoError(t, json.Unmarshal(b, &v), name)
		require.Equal(t, "https://json-schema.org/draft/2020-12/schema", v["$schema"], name)
	}
}

// TestSchemaConformanceCorpus validates every history and registry of the
// shared conformance corpus: all of them must be valid.
func TestSchemaConformanceCorpus(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "..", "shared", "conformance", "cases")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("conformance corpus not found at %s (CI=true): %v", dir, err)
		}
		t.Skipf("conformance corpus not found at %s; check out the shared tree next to the module to run this test", dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no cases in %s", dir)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
			require.NoError(t, err)
			c, ok := doc.(map[string]any)
			require.True(t, ok, "case is not an object")
			h, ok := c["history"]
			require.True(t, ok, "case has no history")
			require.NoError(t, loader.ValidateHistorySchema(f, h))
			r, ok := c["registry"]
			require.True(t, ok, "case has no registry")
			require.NoError(t, loader.ValidateRegistrySchema(f, r))
		})
	}
}

// moduleRoot walks up from the test's directory to the one holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "go.mod not found above the test directory")
		dir = parent
	}
}

// TestRegistryFileWithoutADocument: an empty file, or one of comments
// only, is refused with its name rather than read as a registry of
// nothing (a truncated file, caught by serve --watch mid-write, would
// otherwise swap in an empty registry); {} is the empty registry.
func TestRegistryFileWithoutADocument(t *testing.T) {
	for _, data := range []string{"", "\n  \n", "# tools are coming\n"} {
		_, err := loader.ParseRegistry("tools.yaml", []byte(data))
		require.ErrorContains(t, err, "tools.yaml", "%q", data)
		require.ErrorContains(t, err, "holds no registry", "%q", data)
	}
	for _, data := range []string{"{}", "tools: []\n"} {
		reg, err := loader.ParseRegistry("tools.yaml", []byte(data))
		require.NoError(t, err, "%q", data)
		require.Empty(t, reg.Tools())
	}
}
