package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// --- wire-format builders ----------------------------------------------------
//
// The builders write messages in the exact shapes pydantic-ai's
// ModelMessagesTypeAdapter serializes (copied from the shared conformance
// cases), so that every test goes through loader.DecodeHistory as real
// input does.

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func jsonNullable(s string) string {
	if s == "" {
		return "null"
	}
	return jsonText(s)
}

func wReq(parts ...string) string {
	return `{"parts":[` + strings.Join(parts, ",") + `],"timestamp":"2026-03-02T09:00:00Z","instructions":null,` +
		`"kind":"request","run_id":"run-1","conversation_id":"conv-1","metadata":null,"state":"complete"}`
}

// response is a response message served by provider ("" for null).
func wResp(provider string, parts ...string) string {
	return `{"parts":[` + strings.Join(parts, ",") + `],"usage":{"input_tokens":0,"output_tokens":0,"details":{}},` +
		`"model_name":"function:model_fn:","timestamp":"2026-03-02T09:00:01Z","kind":"response",` +
		`"provider_name":` + jsonNullable(provider) + `,"provider_url":null,"provider_details":null,` +
		`"provider_response_id":null,"finish_reason":null,"run_id":"run-1","conversation_id":"conv-1",` +
		`"metadata":null,"state":"complete"}`
}

func wUser(text string) string {
	return `{"content":` + jsonText(text) + `,"timestamp":"2026-03-02T09:00:00Z","part_kind":"user-prompt"}`
}

// call is an untyped tool call; args is raw JSON.
func wCall(tool, id, args string) string {
	return `{"tool_name":` + jsonText(tool) + `,"args":` + args + `,"tool_call_id":` + jsonText(id) +
		`,"tool_kind":null,"id":null,"provider_name":null,"provider_details":null,"part_kind":"tool-call"}`
}

func wReturn(tool, id string, content any) string {
	return `{"tool_name":` + jsonText(tool) + `,"content":` + jsonText(content) + `,"tool_call_id":` + jsonText(id) +
		`,"tool_kind":null,"metadata":null,"timestamp":"2026-03-02T09:00:00Z","outcome":"success","part_kind":"tool-return"}`
}

func wLoadCall(id, capability string) string {
	return `{"tool_name":"load_capability","args":{"id":` + jsonText(capability) + `},"tool_call_id":` + jsonText(id) +
		`,"tool_kind":"capability-load","id":null,"provider_name":null,"provider_details":null,"part_kind":"tool-call"}`
}

func wLoadReturn(id string) string {
	return `{"tool_name":"load_capability","content":{},"tool_call_id":` + jsonText(id) +
		`,"tool_kind":"capability-load","metadata":null,"timestamp":"2026-03-02T09:00:00Z","outcome":"success","part_kind":"tool-return"}`
}

func wDelta(id string, names ...string) string {
	return `{"tools_added":` + jsonText(names) + `,"tool_call_id":` + jsonNullable(id) + `,"part_kind":"tool-availability-delta"}`
}

// compaction is a compaction part from provider ("" for null) with content
// ("" for null, so no payload).
func wCompaction(provider, content string) string {
	return `{"content":` + jsonNullable(content) + `,"id":null,"provider_name":` + jsonNullable(provider) +
		`,"provider_details":null,"part_kind":"compaction"}`
}

func wHistory(msgs ...string) string { return "[" + strings.Join(msgs, ",") + "]" }

func mustHistory(t testing.TB, msgs ...string) facts.History {
	t.Helper()
	h, err := loader.DecodeHistory(t.Name()+".json", []byte(wHistory(msgs...)), loader.DefaultLimits())
	require.NoError(t, err)
	return h
}

func mustRegistry(t testing.TB, doc string) *facts.Registry {
	t.Helper()
	reg, err := loader.ParseRegistry(t.Name()+".json", []byte(doc))
	require.NoError(t, err)
	return reg
}

// keepFilter is a capability filter keeping exactly the named tools.
func keepFilter(capability string, keep ...string) engine.Source {
	return engine.Source{
		File: "filters/" + capability + ".rego",
		Text: fmt.Sprintf(`package policycheck.capabilities[%q]

prepare_tools contains t.name if {
	some t in input.tools
	t.name in %s
}
`, capability, regoSet(keep)),
	}
}

// dropFilter is a capability filter dropping exactly the named tools.
func dropFilter(capability string, drop ...string) engine.Source {
	return engine.Source{
		File: "filters/" + capability + ".rego",
		Text: fmt.Sprintf(`package policycheck.capabilities[%q]

prepare_tools contains t.name if {
	some t in input.tools
	not t.name in %s
}
`, capability, regoSet(drop)),
	}
}

func regoSet(names []string) string {
	if len(names) == 0 {
		return "set()"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = jsonText(n)
	}
	return "{" + strings.Join(q, ", ") + "}"
}

func mustEngine(t testing.TB, reg *facts.Registry, opts ...engine.Option) *engine.Engine {
	t.Helper()
	e, err := engine.New(context.Background(), append([]engine.Option{engine.Registry(reg)}, opts...)...)
	require.NoError(t, err)
	return e
}

func mustDecide(t testing.TB, e *engine.Engine, h facts.History, ctxDoc any, opts ...engine.DecideOption) *engine.Decision {
	t.Helper()
	d, err := e.Decide(context.Background(), engine.Request{History: h, Context: ctxDoc}, opts...)
	require.NoError(t, err)
	return d
}

// quoted renders names as the reference's unknown-tool list does.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// --- seed 000 ----------------------------------------------------------------

const secretsRegistry = `{
	"capabilities": [{"id": "secrets", "defer_loading": true}],
	"tools": [
		{"name": "get_time"},
		{"name": "secret_op", "capability": "secrets"},
		{"name": "rotate_key", "capability": "secrets"}
	]
}`

const secretOpNotAvailable = "Tool 'secret_op' is not available yet: it belongs to capability 'secrets'. " +
	"Call `load_capability` for it first, then call the tool again once you've read the capability's instructions."

// TestSeed000Route1 covers a load pair injected into the history (by a
// history processor) for a capability whose prepare_tools drops the tool
// then called: the capability is active for this step, so its filter
// governs the call (spec M5 Route 1, seed 000).
func TestSeed000Route1(t *testing.T) {
	reg := mustRegistry(t, secretsRegistry)
	injected := []string{
		wReq(wUser("rotate the key")),
		wResp("", wLoadCall("injected-load", "secrets")),
		wReq(wLoadReturn("injected-load")),
	}
	serving := wResp("", wCall("secret_op", "s1", `{}`))
	tests := []struct {
		note        string
		filter      bool
		msgs        []string
		verdict     string
		message     string
		available   []string
		dispatchAct []string
	}{
		{
			note:    "injected load, filter drops secret_op: unknown tool",
			filter:  true,
			msgs:    append(slices.Clone(injected), serving),
			verdict: engine.UnknownTool,
			message: "Unknown tool name: 'secret_op'. Available tools: 'get_time', 'load_capability', 'rotate_key'",
			// rotate_key is callable: the load is the reveal.
			available:   []string{"get_time", "load_capability", "rotate_key"},
			dispatchAct: []string{"secrets"},
		},
		{
			note:        "no injected load: not available yet, capability form",
			filter:      true,
			msgs:        []string{wReq(wUser("rotate the key")), serving},
			verdict:     engine.NotAvailableYet,
			message:     secretOpNotAvailable,
			available:   []string{"get_time", "load_capability"},
			dispatchAct: []string{},
		},
		{
			note:        "injected load, no filter: executes",
			msgs:        append(slices.Clone(injected), serving),
			verdict:     engine.Execute,
			available:   []string{"get_time", "load_capability", "rotate_key", "secret_op"},
			dispatchAct: []string{"secrets"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			var opts []engine.Option
			if tc.filter {
				opts = append(opts, engine.Modules(dropFilter("secrets", "secret_op")))
			}
			e := mustEngine(t, reg, opts...)
			d := mustDecide(t, e, mustHistory(t, tc.msgs...), nil)
			require.Empty(t, d.Errors)
			require.NotNil(t, d.Dispatch)
			require.Len(t, d.Calls, 1)
			c := d.Calls[0]
			assert.Equal(t, "secret_op", c.Tool)
			assert.Equal(t, tc.verdict, c.Verdict)
			assert.Equal(t, tc.message, c.Message)
			assert.Equal(t, tc.available, d.Dispatch.Available)
			assert.Equal(t, tc.dispatchAct, d.Dispatch.ActiveCapabilities)
			if tc.verdict == engine.UnknownTool {
				assert.Equal(t, "Unknown tool name: 'secret_op'. Available tools: "+quotedList(d.Dispatch.Available), c.Message)
				assert.Contains(t, strings.Join(c.Reasons, "\n"), "policycheck.capabilities.secrets",
					"the reasons name the filter that dropped the tool")
			}
		})
	}
}

// TestSeed000Route2 covers a load pair made before a compaction part that
// the serving provider does not honour as a wire boundary: the anchored
// evidence loads the capability at dispatch, so its filter must run too
// (spec M5 Route 2, A5, V7).
func TestSeed000Route2(t *testing.T) {
	reg := mustRegistry(t, secretsRegistry)
	loadPair := func(provider string) []string {
		return []string{
			wReq(wUser("rotate the key")),
			wResp(provider, wLoadCall("load-secrets", "secrets")),
			wReq(wLoadReturn("load-secrets"), wDelta("load-secrets", "rotate_key", "secret_op")),
		}
	}
	hist := func(loadProvider, cmp, serving string) []string {
		msgs := loadPair(loadProvider)
		if cmp != "" {
			msgs = append(msgs, wResp(loadProvider, cmp))
		}
		return append(msgs, wReq(wUser("go on")), wResp(serving, wCall("secret_op", "s1", `{}`)))
	}
	tests := []struct {
		note     string
		filter   bool
		msgs     []string
		verdict  string
		message  string
		evidence []string
	}{
		{
			note:     "foreign provider compaction, filter: unknown tool",
			filter:   true,
			msgs:     hist("openai", wCompaction("anthropic", "foreign"), "openai"),
			verdict:  engine.UnknownTool,
			message:  "Unknown tool name: 'secret_op'. Available tools: 'get_time', 'load_capability', 'rotate_key'",
			evidence: []string{"secrets"},
		},
		{
			note:     "foreign provider compaction, no filter: executes",
			msgs:     hist("openai", wCompaction("anthropic", "foreign"), "openai"),
			verdict:  engine.Execute,
			evidence: []string{"secrets"},
		},
		{
			note:     "payload-less compaction of the serving provider, filter: unknown tool",
			filter:   true,
			msgs:     hist("anthropic", wCompaction("anthropic", ""), "anthropic"),
			verdict:  engine.UnknownTool,
			message:  "Unknown tool name: 'secret_op'. Available tools: 'get_time', 'load_capability', 'rotate_key'",
			evidence: []string{"secrets"},
		},
		{
			note:     "payload-less compaction of the serving provider, no filter: executes",
			msgs:     hist("anthropic", wCompaction("anthropic", ""), "anthropic"),
			verdict:  engine.Execute,
			evidence: []string{"secrets"},
		},
		{
			note:     "honoured boundary (same provider, content), filter: not available yet",
			filter:   true,
			msgs:     hist("anthropic", wCompaction("anthropic", "summary"), "anthropic"),
			verdict:  engine.NotAvailableYet,
			message:  secretOpNotAvailable,
			evidence: []string{},
		},
		{
			note:     "honoured boundary (same provider, content), no filter: not available yet",
			msgs:     hist("anthropic", wCompaction("anthropic", "summary"), "anthropic"),
			verdict:  engine.NotAvailableYet,
			message:  secretOpNotAvailable,
			evidence: []string{},
		},
		{
			note:     "openai compaction with plaintext only is a boundary for the gate",
			filter:   true,
			msgs:     hist("openai", wCompaction("openai", "plain summary"), "openai"),
			verdict:  engine.NotAvailableYet,
			message:  secretOpNotAvailable,
			evidence: []string{},
		},
		{
			note:     "control: no compaction, filter: unknown tool without evidence",
			filter:   true,
			msgs:     hist("openai", "", "openai"),
			verdict:  engine.UnknownTool,
			message:  "Unknown tool name: 'secret_op'. Available tools: 'get_time', 'load_capability', 'rotate_key'",
			evidence: []string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			var opts []engine.Option
			if tc.filter {
				opts = append(opts, engine.Modules(dropFilter("secrets", "secret_op")))
			}
			e := mustEngine(t, reg, opts...)
			d := mustDecide(t, e, mustHistory(t, tc.msgs...), nil)
			require.Empty(t, d.Errors)
			require.NotNil(t, d.Dispatch)
			require.Len(t, d.Calls, 1)
			c := d.Calls[0]
			assert.Equal(t, tc.verdict, c.Verdict)
			assert.Equal(t, tc.message, c.Message)
			assert.Equal(t, tc.evidence, d.Dispatch.Evidence.Loaded)
			if len(tc.evidence) > 0 {
				// The conservative window dropped the load; the next
				// request neither sees it nor runs the filter for it.
				assert.Empty(t, d.Facts.Loaded)
				assert.Equal(t, []string{"secrets"}, d.Dispatch.ActiveCapabilities)
				assert.NotContains(t, d.Available, "secret_op")
				assert.NotContains(t, d.Advertised, "secret_op")
			}
			if tc.verdict == engine.UnknownTool {
				assert.Equal(t, "Unknown tool name: 'secret_op'. Available tools: "+quotedList(d.Dispatch.Available), c.Message)
			}
		})
	}
}

// --- fingerprint cache -------------------------------------------------------

const opsRegistry = `{
	"capabilities": [
		{"id": "ops"},
		{"id": "secrets", "defer_loading": true}
	],
	"tools": [
		{"name": "get_time"},
		{"name": "send_mail", "capability": "ops"},
		{"name": "secret_op", "capability": "secrets"},
		{"name": "rotate_key", "capability": "secrets"}
	]
}`

// opsFilter keeps send_mail only for the ops group: it reads the context,
// so the context is part of its cache key.
var opsFilter = engine.Source{File: "filters/ops.rego", Text: `package policycheck.capabilities.ops

prepare_tools contains t.name if {
	some t in input.tools
	t.name != "send_mail"
}

prepare_tools contains "send_mail" if input.context.group == "ops"
`}

func cacheCounts(e *engine.Engine) (hits, misses int64) {
	hits, misses, _ = e.CacheStats()
	return hits, misses
}

func callTo(t testing.TB, d *engine.Decision, tool string) engine.CallVerdict {
	t.Helper()
	for _, c := range d.Calls {
		if c.Tool == tool {
			return c
		}
	}
	t.Fatalf("no call to %q in %v", tool, d.Calls)
	return engine.CallVerdict{}
}

// TestCacheHitOnUnrelatedFacts: facts that no filter reads (a user prompt,
// a plain tool return, a further call) leave every filter key unchanged,
// so the filters are not re-run and the fingerprint stays the same.
func TestCacheHitOnUnrelatedFacts(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	base := []string{wReq(wUser("what time is it")), wResp("openai", wCall("get_time", "c1", `{}`))}
	tests := []struct {
		note string
		msgs []string
	}{
		{note: "same history again", msgs: base},
		{note: "user prompt appended", msgs: append(slices.Clone(base), wReq(wUser("thanks")))},
		{note: "plain tool return and a new call appended", msgs: append(slices.Clone(base),
			wReq(wReturn("get_time", "c1", "09:00")), wResp("openai", wCall("get_time", "c2", `{}`)))},
		{note: "different serving provider, no compaction", msgs: append(slices.Clone(base),
			wReq(wReturn("get_time", "c1", "09:00")), wResp("anthropic", wCall("send_mail", "c2", `{}`)))},
	}
	ctxDoc := map[string]any{"group": "ops"}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			e := mustEngine(t, reg, engine.Modules(opsFilter))
			first := mustDecide(t, e, mustHistory(t, base...), ctxDoc)
			hits0, misses0 := cacheCounts(e)
			require.Positive(t, misses0, "the first decision runs the filter")

			d := mustDecide(t, e, mustHistory(t, tc.msgs...), ctxDoc)
			hits1, misses1 := cacheCounts(e)
			assert.Equal(t, misses0, misses1, "no filter re-ran")
			assert.Greater(t, hits1, hits0, "the filter result came from the cache")
			assert.Equal(t, first.Fingerprint, d.Fingerprint)
			assert.True(t, strings.HasPrefix(d.Fingerprint, "sha256:"), d.Fingerprint)
		})
	}
}

// TestCacheReResolvesWhenActivityMoves: anchored evidence that activates a
// deferred capability at dispatch changes the dispatch-active set, which is
// part of every filter key (spec M4–M5): the filters re-run and the
// fingerprint changes, and the new capability's filter governs the call.
func TestCacheReResolvesWhenActivityMoves(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	hist := func(cmp string) []string {
		return []string{
			wReq(wUser("rotate the key")),
			wResp("openai", wLoadCall("l1", "secrets")),
			wReq(wLoadReturn("l1"), wDelta("l1", "rotate_key", "secret_op")),
			wResp("openai", cmp),
			wReq(wUser("go on")),
			wResp("openai", wCall("secret_op", "s1", `{}`)),
		}
	}
	e := mustEngine(t, reg, engine.Modules(opsFilter, dropFilter("secrets", "secret_op")))

	honoured := mustDecide(t, e, mustHistory(t, hist(wCompaction("openai", "summary"))...), nil)
	require.Equal(t, []string{"ops"}, honoured.Dispatch.ActiveCapabilities)
	require.Equal(t, engine.NotAvailableYet, honoured.Calls[0].Verdict)
	hits0, misses0 := cacheCounts(e)

	// Same conservative facts; only the anchored evidence differs.
	foreign := mustDecide(t, e, mustHistory(t, hist(wCompaction("anthropic", "foreign"))...), nil)
	require.Equal(t, honoured.Facts, foreign.Facts)
	require.Equal(t, []string{"ops", "secrets"}, foreign.Dispatch.ActiveCapabilities)
	hits1, misses1 := cacheCounts(e)
	assert.Greater(t, misses1, misses0, "the dispatch-active set moved: filters re-ran")
	assert.Greater(t, hits1, hits0, "the next request's filters were unchanged: cache hit")
	assert.NotEqual(t, honoured.Fingerprint, foreign.Fingerprint)
	assert.Equal(t, engine.UnknownTool, foreign.Calls[0].Verdict, "the secrets filter governed the call")

	// And back: the first history hits the cache again, with its own
	// fingerprint.
	again := mustDecide(t, e, mustHistory(t, hist(wCompaction("openai", "summary"))...), nil)
	_, misses2 := cacheCounts(e)
	assert.Equal(t, misses1, misses2)
	assert.Equal(t, honoured.Fingerprint, again.Fingerprint)
}

// TestCacheContextIsPartOfTheKey: a filter that reads input.context must be
// re-run for a different context, never answered from another context's
// entry; the same context written with its keys in another order is the
// same key.
func TestCacheContextIsPartOfTheKey(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	e := mustEngine(t, reg, engine.Modules(opsFilter))
	h := mustHistory(t, wReq(wUser("mail the report")), wResp("openai", wCall("send_mail", "m1", `{"to":"ann"}`)))

	ops := mustDecide(t, e, h, map[string]any{"group": "ops", "user": "ann"})
	assert.Equal(t, engine.Execute, ops.Calls[0].Verdict)
	_, misses0 := cacheCounts(e)

	sales := mustDecide(t, e, h, map[string]any{"group": "sales", "user": "ann"})
	_, misses1 := cacheCounts(e)
	assert.Greater(t, misses1, misses0, "another context re-runs the filter")
	assert.NotEqual(t, ops.Fingerprint, sales.Fingerprint)
	assert.Equal(t, engine.UnknownTool, sales.Calls[0].Verdict)
	assert.NotContains(t, sales.Available, "send_mail")

	reordered := mustDecide(t, e, h, json.RawMessage(`{"user": "ann", "group": "ops"}`))
	_, misses2 := cacheCounts(e)
	assert.Equal(t, misses1, misses2, "the context digest is canonical")
	assert.Equal(t, ops.Fingerprint, reordered.Fingerprint)
	assert.Equal(t, engine.Execute, reordered.Calls[0].Verdict)
}

// TestCacheSmallCapacityStaysCorrect: evictions cost re-runs, never wrong
// answers.
func TestCacheSmallCapacityStaysCorrect(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	e := mustEngine(t, reg, engine.Modules(opsFilter), engine.CacheSize(1))
	h := mustHistory(t, wReq(wUser("mail")), wResp("", wCall("send_mail", "m1", `{}`)))
	for i := 0; i < 6; i++ {
		group := []string{"ops", "sales"}[i%2]
		want := map[string]string{"ops": engine.Execute, "sales": engine.UnknownTool}[group]
		d := mustDecide(t, e, h, map[string]any{"group": group})
		assert.Equal(t, want, d.Calls[0].Verdict, "round %d, group %s", i, group)
	}
	_, _, entries := e.CacheStats()
	assert.Equal(t, 1, entries)
}

// TestCacheNoStaleResultAfterReload: a reload with a changed policy or a
// changed registry changes the revision in every key, so nothing decided
// before the reload is served after it.
func TestCacheNoStaleResultAfterReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "ops.rego")
	write := func(src engine.Source) {
		require.NoError(t, os.WriteFile(file, []byte(src.Text), 0o600))
	}
	reg := mustRegistry(t, opsRegistry)
	h := mustHistory(t,
		wReq(wUser("mail and time")),
		wResp("", wCall("send_mail", "m1", `{}`), wCall("get_time", "t1", `{}`), wCall("get_weather", "w1", `{}`)))

	t.Run("changed policy: the filter keeps a different set", func(t *testing.T) {
		write(keepFilter("ops", "send_mail"))
		e := mustEngine(t, reg, engine.PolicyPaths(dir))
		before := mustDecide(t, e, h, nil)
		assert.Equal(t, engine.Execute, callTo(t, before, "send_mail").Verdict)
		assert.Equal(t, engine.UnknownTool, callTo(t, before, "get_time").Verdict)
		policyRev, regRev := e.Revision()

		write(keepFilter("ops", "get_time"))
		require.NoError(t, e.Reload(ctx))
		after := mustDecide(t, e, h, nil)
		newPolicyRev, newRegRev := e.Revision()
		assert.NotEqual(t, policyRev, newPolicyRev)
		assert.Equal(t, regRev, newRegRev)
		assert.NotEqual(t, before.Fingerprint, after.Fingerprint)
		assert.Equal(t, engine.UnknownTool, callTo(t, after, "send_mail").Verdict)
		assert.Equal(t, engine.Execute, callTo(t, after, "get_time").Verdict)
		assert.Equal(t, []string{"get_time", "load_capability"}, after.Dispatch.Available)
	})

	t.Run("changed registry", func(t *testing.T) {
		write(dropFilter("ops", "send_mail"))
		e := mustEngine(t, reg, engine.PolicyPaths(dir))
		before := mustDecide(t, e, h, nil)
		assert.Equal(t, engine.UnknownTool, callTo(t, before, "get_weather").Verdict)
		policyRev, regRev := e.Revision()

		reg2 := mustRegistry(t, strings.Replace(opsRegistry, `{"name": "get_time"},`,
			`{"name": "get_time"}, {"name": "get_weather"},`, 1))
		require.NoError(t, e.Reload(ctx, engine.Registry(reg2)))
		after := mustDecide(t, e, h, nil)
		newPolicyRev, newRegRev := e.Revision()
		assert.Equal(t, policyRev, newPolicyRev)
		assert.NotEqual(t, regRev, newRegRev)
		assert.NotEqual(t, before.Fingerprint, after.Fingerprint)
		assert.Equal(t, engine.Execute, callTo(t, after, "get_weather").Verdict)
		assert.Contains(t, after.Available, "get_weather")
		assert.Equal(t, engine.UnknownTool, callTo(t, after, "send_mail").Verdict)
		assert.Same(t, reg2, e.Registry())
	})

	t.Run("failed reload keeps serving the old snapshot", func(t *testing.T) {
		write(keepFilter("ops", "send_mail"))
		e := mustEngine(t, reg, engine.PolicyPaths(dir))
		before := mustDecide(t, e, h, nil)
		write(engine.Source{Text: "package policycheck.capabilities.ops\n\nprepare_tools contains x if {\n"})
		err := e.Reload(ctx)
		var pe *engine.PolicyError
		require.ErrorAs(t, err, &pe)
		after := mustDecide(t, e, h, nil)
		assert.Equal(t, before.Fingerprint, after.Fingerprint)
		assert.Equal(t, engine.Execute, callTo(t, after, "send_mail").Verdict)
	})
}

// --- fail closed -------------------------------------------------------------

// slowLoop makes a rule take seconds: a deadline of a millisecond always
// expires inside it.
const slowLoop = `some i in numbers.range(1, 4000)
	some j in numbers.range(1, 4000)
	i * j < 0`

// TestFailClosed: a filter or policy that errors, times out, returns
// anything but a set of registry tool names, or leaves the decision
// undefined, makes no tool available and denies every call with a message;
// Decide itself does not fail, and Errors names the cause.
func TestFailClosed(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	h := mustHistory(t,
		wReq(wUser("do everything")),
		wResp("", wLoadCall("l1", "secrets")),
		wReq(wLoadReturn("l1"), wDelta("l1", "rotate_key", "secret_op")),
		wResp("openai",
			wCall("get_time", "c1", `{}`),
			wCall("send_mail", "c2", `{}`),
			wCall("secret_op", "c3", `{}`),
			wCall("no_such_tool", "c4", `{}`),
			wCall("load_capability", "c5", `{"id": "secrets"}`)))
	opsFile := func(body string) engine.Source {
		return engine.Source{File: "filters/ops.rego", Text: "package policycheck.capabilities.ops\n\n" + body + "\n"}
	}
	tests := []struct {
		note     string
		opts     []engine.Option
		decide   []engine.DecideOption
		wantErrs []string
		// cancel cancels the decision once its evaluation is about to
		// start; waitDeadline holds evaluation until the decision's
		// deadline has passed.
		cancel, waitDeadline bool
		// wantAnyErr: the errors contain one of these.
		wantAnyErr []string
	}{
		{
			note: "division by zero",
			opts: []engine.Option{engine.Modules(opsFile(`prepare_tools contains t.name if {
	some t in input.tools
	count(input.tools) / 0 > 1
}`))},
			wantErrs: []string{"filter policycheck.capabilities.ops (filters/ops.rego) failed", "divide by zero"},
		},
		{
			note: "conflicting complete rule",
			opts: []engine.Option{engine.Modules(opsFile(`prepare_tools := {"get_time"} if count(input.tools) > 0

prepare_tools := {"send_mail"} if count(input.tools) > 1`))},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", "conflict"},
		},
		{
			// json.unmarshal hides the type from OPA's checker: the
			// contract refuses what it can see at load (TestNewRejectsPolicies).
			note:     "array instead of a set",
			opts:     []engine.Option{engine.Modules(opsFile(`prepare_tools := json.unmarshal("[\"get_time\"]")`))},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", "must be a set of tool names, not an array"},
		},
		{
			note:     "string instead of a set",
			opts:     []engine.Option{engine.Modules(opsFile(`prepare_tools := json.unmarshal("\"get_time\"")`))},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", "must be a set of tool names, not a string"},
		},
		{
			note:     "set holding a number",
			opts:     []engine.Option{engine.Modules(opsFile(`prepare_tools := {"get_time", 7}`))},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", "must be a set of tool names"},
		},
		{
			note:     "names a tool not in the registry",
			opts:     []engine.Option{engine.Modules(opsFile(`prepare_tools := {"get_time", "send_mail", "ghost_tool"}`))},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", `"ghost_tool" is not a registry tool`},
		},
		{
			note:     "names a framework tool",
			opts:     []engine.Option{engine.Modules(opsFile(`prepare_tools := {"get_time", "load_capability"}`))},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", `"load_capability" is not a registry tool`},
		},
		{
			note:     "undefined",
			opts:     []engine.Option{engine.Modules(opsFile(`prepare_tools := {"get_time"} if input.context.never`))},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", "undefined"},
		},
		{
			note: "deferred capability's filter errors while it is loaded",
			opts: []engine.Option{engine.Modules(engine.Source{File: "filters/secrets.rego", Text: `package policycheck.capabilities.secrets

prepare_tools := {"rotate_key"} if count(input.tools) > 0

prepare_tools := {"secret_op"} if count(input.tools) > 0
`})},
			wantErrs: []string{"filter policycheck.capabilities.secrets (filters/secrets.rego) failed"},
		},
		{
			note: "filter deadline expires",
			opts: []engine.Option{engine.Modules(opsFile(`prepare_tools contains t.name if {
	some t in input.tools
	` + slowLoop + `
}`))},
			decide:   []engine.DecideOption{engine.WithDeadline(time.Millisecond)},
			wantErrs: []string{"filter policycheck.capabilities.ops (filters/ops.rego) failed", "eval_cancel_error"},
		},
		{
			note: "operator rule deadline expires",
			opts: []engine.Option{engine.Modules(engine.Source{File: "rules/slow.rego", Text: `package policycheck.rules.slow

deny contains {"reason": "never", "message": "never"} if {
	input.call.tool == "get_time"
	` + slowLoop + `
}
`})},
			// The decision is cancelled once its evaluation is about to
			// start, not by a timer: a 1ms deadline could pass before
			// evaluation on a loaded machine, which fails closed on
			// another path (TestDecisionMemo pins that one).
			cancel:   true,
			wantErrs: []string{"policy evaluation failed", "eval_cancel_error"},
		},
		{
			note: "default deadline expires",
			opts: []engine.Option{engine.DefaultDeadline(time.Millisecond), engine.Modules(engine.Source{File: "rules/slow.rego", Text: `package policycheck.rules.slow

hide contains "get_time" if {
	` + slowLoop + `
}
`})},
			// Evaluation waits for the default deadline to pass, so it has
			// expired by the time the policy runs or, on a loaded machine,
			// already before the deadline check: both fail closed naming
			// the deadline.
			waitDeadline: true,
			wantErrs:     []string{"policy evaluation failed"},
			wantAnyErr:   []string{"eval_cancel_error", "deadline passed before evaluation: context deadline exceeded"},
		},
		{
			note: "operator replaces the default and leaves decision undefined",
			opts: []engine.Option{engine.WithoutDefaults(), engine.Modules(engine.Source{File: "operator/availability.rego",
				Text: "package policycheck.availability\n\ndecision := {\"available\": set(), \"advertised\": set(), " +
					"\"dispatch_available\": set(), \"verdicts\": []} if input.context.never\n"})},
			wantErrs: []string{"policy decision is undefined", "data.policycheck.availability.decision"},
		},
		{
			note: "operator replacement that ignores a failed filter",
			opts: []engine.Option{engine.WithoutDefaults(), engine.Modules(
				opsFile(`prepare_tools := json.unmarshal("[\"get_time\"]")`),
				engine.Source{File: "operator/availability.rego", Text: `package policycheck.availability

everything := {"get_time", "send_mail", "secret_op", "rotate_key", "load_capability"}

decision := {
	"available": everything,
	"advertised": everything,
	"dispatch_available": everything,
	"verdicts": [{"verdict": "execute"} | some _ in input.dispatch.calls],
}
`})},
			wantErrs: []string{"policycheck.capabilities.ops (filters/ops.rego)", "must be a set of tool names, not an array"},
		},
		{
			note: "operator decision is not an object",
			opts: []engine.Option{engine.WithoutDefaults(), engine.Modules(engine.Source{File: "operator/availability.rego",
				Text: "package policycheck.availability\n\ndecision := json.unmarshal(`\"allow everything\"`)\n"})},
			wantErrs: []string{"policy decision is not an object"},
		},
		{
			note: "operator decision without one verdict per call",
			opts: []engine.Option{engine.WithoutDefaults(), engine.Modules(engine.Source{File: "operator/availability.rego",
				Text: `package policycheck.availability

decision := {
	"available": {"get_time"},
	"advertised": {"get_time"},
	"dispatch_available": {"get_time"},
	"verdicts": [{"verdict": "execute"}],
}
`})},
			wantErrs: []string{"one verdict per call"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			e := mustEngine(t, reg, tc.opts...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := tc.decide
			switch {
			case tc.cancel:
				opts = append(opts, engine.WithBeforeEval(func(context.Context) { cancel() }))
			case tc.waitDeadline:
				opts = append(opts, engine.WithBeforeEval(func(ctx context.Context) {
					_, ok := ctx.Deadline()
					require.True(t, ok, "the default deadline applies")
					<-ctx.Done()
				}))
			}
			d, err := e.Decide(ctx, engine.Request{History: h}, opts...)
			require.NoError(t, err, "a failed policy is a decision, not an error")
			assertFailedClosed(t, reg, d)
			all := strings.Join(d.Errors, "\n")
			for _, want := range tc.wantErrs {
				assert.Contains(t, all, want)
			}
			if len(tc.wantAnyErr) > 0 {
				found := false
				for _, want := range tc.wantAnyErr {
					found = found || strings.Contains(all, want)
				}
				assert.True(t, found, "errors %q name none of %q", all, tc.wantAnyErr)
			}
			// The same document is what eval prints.
			b, err := json.Marshal(d)
			require.NoError(t, err)
			assert.Contains(t, string(b), `"errors":[`)
		})
	}
}

func assertFailedClosed(t *testing.T, reg *facts.Registry, d *engine.Decision) {
	t.Helper()
	require.NotEmpty(t, d.Errors)
	for _, name := range reg.ToolNames() {
		assert.NotContains(t, d.Available, name)
		assert.NotContains(t, d.Advertised, name)
		if d.Dispatch != nil {
			assert.NotContains(t, d.Dispatch.Available, name)
		}
	}
	require.NotEmpty(t, d.Calls)
	for _, c := range d.Calls {
		assert.Equal(t, engine.Denied, c.Verdict, "call %s", c.Tool)
		assert.NotEmpty(t, c.Message, "call %s", c.Tool)
		assert.NotEmpty(t, c.Reasons, "call %s", c.Tool)
	}
}

// TestFilterOfInactiveCapabilityDoesNotRun: a failing filter fails a
// decision only when its capability is active; an unloaded deferred
// capability's filter is never run (spec M2).
func TestFilterOfInactiveCapabilityDoesNotRun(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "filters/secrets.rego", Text: `package policycheck.capabilities.secrets

prepare_tools := json.unmarshal("[\"get_time\"]")
`}))
	d := mustDecide(t, e, mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{}`))), nil)
	assert.Empty(t, d.Errors)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict)
	_, misses := cacheCounts(e)
	assert.Zero(t, misses)
}

// TestNewRejectsPolicies: filters are cached, so they must be pure
// functions of their input; a filter for a capability the registry lacks
// is a mistake. Both are found by engine.New, with file:row:col.
func TestNewRejectsPolicies(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	tests := []struct {
		note     string
		src      engine.Source
		code     string
		location string
	}{
		{
			note: "time.now_ns in prepare_tools",
			src: engine.Source{File: "filters/ops.rego", Text: `package policycheck.capabilities.ops

prepare_tools contains t.name if {
	some t in input.tools
	time.now_ns() > 0
}
`},
			code:     "nondeterministic_builtin",
			location: "filters/ops.rego:5:2",
		},
		{
			note: "http.send in a helper rule the filter depends on",
			src: engine.Source{File: "filters/ops.rego", Text: `package policycheck.capabilities.ops

prepare_tools contains t.name if {
	some t in input.tools
	_allowed(t.name)
}

_allowed(name) if {
	resp := http.send({"method": "GET", "url": concat("", ["http://acl.invalid/", name])})
	resp.status_code == 200
}
`},
			code:     "nondeterministic_builtin",
			location: "filters/ops.rego:9:10",
		},
		{
			note: "rand.intn in a complete filter",
			src: engine.Source{File: "filters/secrets.rego", Text: `package policycheck.capabilities.secrets

prepare_tools := {"secret_op"} if rand.intn("coin", 2) == 0
`},
			code:     "nondeterministic_builtin",
			location: "filters/secrets.rego:3:35",
		},
		{
			note: "prepare_tools written as a function",
			src: engine.Source{File: "filters/ops.rego", Text: `package policycheck.capabilities.ops

prepare_tools(tools) := {t.name | some t in tools}
`},
			code:     "rule_shape",
			location: "filters/ops.rego:3:1",
		},
		{
			note: "filter for a capability the registry lacks",
			src: engine.Source{File: "filters/billing.rego", Text: `package policycheck.capabilities.billing

prepare_tools := set()
`},
			code:     "unknown_capability",
			location: "filters/billing.rego:1:1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			_, err := engine.New(context.Background(), engine.Registry(reg), engine.Modules(tc.src))
			var pe *engine.PolicyError
			require.True(t, errors.As(err, &pe), "want *engine.PolicyError, got %v", err)
			require.NotEmpty(t, pe.Errors)
			p := pe.Errors[0]
			assert.Equal(t, tc.code, p.Code)
			assert.Equal(t, tc.location, fmt.Sprintf("%s:%d:%d", p.File, p.Row, p.Col))
			assert.Contains(t, err.Error(), tc.location+": "+tc.code)
		})
	}
}

// --- operator rules ----------------------------------------------------------

const paymentsRegistry = `{
	"capabilities": [],
	"tools": [
		{"name": "get_time"},
		{"name": "read_ledger"},
		{"name": "transfer_funds"}
	]
}`

const transferDenied = "Transfers above 1000 need a second approver: ask the user to approve it first."

// TestOperatorRules: policycheck.rules.* packages hide tools per request
// (testdata/rules/groups.rego) and deny single calls with their own message
// (testdata/rules/payments.rego).
func TestOperatorRules(t *testing.T) {
	reg := mustRegistry(t, paymentsRegistry)
	e := mustEngine(t, reg, engine.PolicyPaths("testdata/rules"))
	tests := []struct {
		note      string
		ctx       any
		tool      string
		args      string
		verdict   string
		message   string
		reason    string
		available []string
	}{
		{
			note:      "hidden by group: unknown tool, absent from the list",
			ctx:       map[string]any{"group": "interns"},
			tool:      "transfer_funds",
			args:      `{"amount": 10}`,
			verdict:   engine.UnknownTool,
			message:   "Unknown tool name: 'transfer_funds'. Available tools: 'get_time', 'read_ledger'",
			reason:    "hidden by an operator rule",
			available: []string{"get_time", "read_ledger"},
		},
		{
			note:      "another group hides more",
			ctx:       map[string]any{"group": "guests"},
			tool:      "read_ledger",
			args:      `{}`,
			verdict:   engine.UnknownTool,
			message:   "Unknown tool name: 'read_ledger'. Available tools: 'get_time'",
			reason:    "hidden by an operator rule",
			available: []string{"get_time"},
		},
		{
			note:      "every tool hidden: none available",
			ctx:       map[string]any{"group": "nobody"},
			tool:      "get_time",
			args:      `{}`,
			verdict:   engine.UnknownTool,
			message:   "Unknown tool name: 'get_time'. No tools available.",
			reason:    "hidden by an operator rule",
			available: []string{},
		},
		{
			note:      "denied above the limit",
			ctx:       map[string]any{"group": "finance"},
			tool:      "transfer_funds",
			args:      `{"amount": 5000, "to": "acme"}`,
			verdict:   engine.Denied,
			message:   transferDenied,
			reason:    "denied by policycheck.rules.payments (testdata/rules/payments.rego:13:1): transfer above the approval limit",
			available: []string{"get_time", "read_ledger", "transfer_funds"},
		},
		{
			note:      "args as a JSON string are parsed",
			ctx:       map[string]any{"group": "finance"},
			tool:      "transfer_funds",
			args:      jsonText(`{"amount": 5000, "to": "acme"}`),
			verdict:   engine.Denied,
			message:   transferDenied,
			reason:    "policycheck.rules.payments",
			available: []string{"get_time", "read_ledger", "transfer_funds"},
		},
		{
			note:      "within the limit",
			ctx:       map[string]any{"group": "finance"},
			tool:      "transfer_funds",
			args:      `{"amount": 999}`,
			verdict:   engine.Execute,
			available: []string{"get_time", "read_ledger", "transfer_funds"},
		},
		{
			note:      "args that are not JSON carry no amount",
			ctx:       map[string]any{"group": "finance"},
			tool:      "transfer_funds",
			args:      jsonText(`amount=5000`),
			verdict:   engine.Execute,
			available: []string{"get_time", "read_ledger", "transfer_funds"},
		},
		{
			note:      "no context: nothing hidden",
			tool:      "transfer_funds",
			args:      `null`,
			verdict:   engine.Execute,
			available: []string{"get_time", "read_ledger", "transfer_funds"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			h := mustHistory(t, wReq(wUser("pay acme")), wResp("openai", wCall(tc.tool, "p1", tc.args)))
			d := mustDecide(t, e, h, tc.ctx)
			require.Empty(t, d.Errors)
			c := d.Calls[0]
			assert.Equal(t, tc.verdict, c.Verdict)
			assert.Equal(t, tc.message, c.Message)
			if tc.reason != "" {
				assert.Contains(t, strings.Join(c.Reasons, "\n"), tc.reason)
			}
			assert.Equal(t, tc.available, d.Available)
			assert.Equal(t, tc.available, d.Advertised)
			assert.Equal(t, tc.available, d.Dispatch.Available)
		})
	}
}

// TestTestdataPoliciesAreFormatted keeps the operator examples opa fmt
// clean.
func TestTestdataPoliciesAreFormatted(t *testing.T) {
	files, err := filepath.Glob("testdata/rules/*.rego")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		out, err := format.SourceWithOpts(f, src, format.Opts{RegoVersion: ast.RegoV1})
		require.NoError(t, err, f)
		assert.Equal(t, string(src), string(out), "%s is not opa fmt clean", f)
	}
}

// --- explain -----------------------------------------------------------------

// TestExplainNamesWhatRemovedATool: a tool that a filter dropped or a rule
// hid is explained by that filter or rule, not only by the gate's facts
// (which say it is loaded).
func TestExplainNamesWhatRemovedATool(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	e := mustEngine(t, reg, engine.Modules(dropFilter("secrets", "secret_op"), engine.Source{File: "rules/hide.rego",
		Text: "package policycheck.rules.hide\n\nhide contains \"get_time\" if input.context.group == \"interns\"\n"}))
	h := mustHistory(t,
		wReq(wUser("rotate")),
		wResp("", wLoadCall("l1", "secrets")),
		wReq(wLoadReturn("l1"), wDelta("l1", "rotate_key", "secret_op")),
		wResp("", wCall("secret_op", "c1", `{}`), wCall("get_time", "c2", `{}`)))
	x, err := e.Explain(context.Background(), engine.Request{History: h, Context: map[string]any{"group": "interns"}})
	require.NoError(t, err)
	why := map[string]string{}
	for _, tool := range x.Tools {
		why[tool.Name] = strings.Join(tool.Why, "\n")
	}
	assert.Contains(t, why["secret_op"], "dropped by filter policycheck.capabilities.secrets (filters/secrets.rego:3:1)")
	assert.NotContains(t, why["rotate_key"], "dropped by filter")
	// The rule is named with its package, file and row.
	const hider = "hidden by an operator rule, policycheck.rules.hide.hide (rules/hide.rego:3:1), for this request"
	assert.Contains(t, why["get_time"], hider)
	require.Len(t, x.Calls, 2)
	assert.Equal(t, engine.UnknownTool, x.Calls[0].Verdict)
	assert.Contains(t, strings.Join(x.Calls[0].Why, "\n"), "dropped by filter policycheck.capabilities.secrets (filters/secrets.rego:3:1)")
	assert.Contains(t, strings.Join(x.Calls[1].Why, "\n"), hider)
	// eval's reasons say the same (the policy's verdict carries them).
	assert.Contains(t, strings.Join(x.Decision.Calls[1].Reasons, "\n"), hider)
}

// TestExplainNamesDispatchOnlyFilter: a filter that runs only at dispatch
// (its capability active through anchored evidence, seed 000 Route 2) is
// named as such.
func TestExplainNamesDispatchOnlyFilter(t *testing.T) {
	reg := mustRegistry(t, secretsRegistry)
	e := mustEngine(t, reg, engine.Modules(dropFilter("secrets", "secret_op")))
	h := mustHistory(t,
		wResp("openai", wLoadCall("l1", "secrets")),
		wReq(wLoadReturn("l1"), wDelta("l1", "rotate_key", "secret_op")),
		wResp("openai", wCompaction("anthropic", "foreign")),
		wReq(wUser("go on")),
		wResp("openai", wCall("secret_op", "s1", `{}`)))
	x, err := e.Explain(context.Background(), engine.Request{History: h})
	require.NoError(t, err)
	for _, tool := range x.Tools {
		why := strings.Join(tool.Why, "\n")
		if tool.Name == "secret_op" {
			assert.Contains(t, why, "dropped at dispatch by filter policycheck.capabilities.secrets (filters/secrets.rego:3:1)")
		} else {
			assert.NotContains(t, why, "dropped")
		}
	}
	assert.Equal(t, engine.UnknownTool, x.Calls[0].Verdict)
}

// TestExecuteOnlyWhenDispatchAvailable: whatever an operator's replacement
// policy says, a call executes only if its tool is in Dispatch.Available,
// and nothing is advertised that is not available.
func TestExecuteOnlyWhenDispatchAvailable(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	e := mustEngine(t, reg, engine.WithoutDefaults(), engine.Modules(engine.Source{File: "operator/availability.rego", Text: `package policycheck.availability

decision := {
	"available": {"get_time"},
	"advertised": {"get_time", "send_mail"},
	"dispatch_available": {"get_time"},
	"verdicts": [{"verdict": "execute"} | some _ in input.dispatch.calls],
}
`}))
	d := mustDecide(t, e, mustHistory(t, wReq(wUser("hi")),
		wResp("", wCall("get_time", "c1", `{}`), wCall("send_mail", "c2", `{}`))), nil)
	assert.Equal(t, []string{"get_time"}, d.Available)
	assert.Equal(t, []string{"get_time"}, d.Advertised)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict)
	assert.Equal(t, engine.Denied, d.Calls[1].Verdict)
	assert.NotEmpty(t, d.Calls[1].Message)
	assert.Contains(t, strings.Join(d.Calls[1].Reasons, "\n"), "dispatch availability excludes")
}

// TestCacheActiveSetIsPartOfTheKey: input.active_capabilities reaches the
// filter, so a filter result under one active set is never reused under
// another.
func TestCacheActiveSetIsPartOfTheKey(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	// ops drops send_mail while secrets is active.
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "filters/ops.rego", Text: `package policycheck.capabilities.ops

prepare_tools contains t.name if {
	some t in input.tools
	not _dropped(t.name)
}

_dropped("send_mail") if "secrets" in input.active_capabilities
`}))
	hist := func(cmp string) facts.History {
		return mustHistory(t,
			wResp("openai", wLoadCall("l1", "secrets")),
			wReq(wLoadReturn("l1")),
			wResp("openai", cmp),
			wReq(wUser("mail it")),
			wResp("openai", wCall("send_mail", "m1", `{}`)))
	}
	for _, tc := range []struct {
		note    string
		cmp     string
		verdict string
	}{
		{note: "secrets not active", cmp: wCompaction("openai", "summary"), verdict: engine.Execute},
		{note: "secrets active through evidence", cmp: wCompaction("anthropic", "foreign"), verdict: engine.UnknownTool},
		{note: "secrets not active again", cmp: wCompaction("openai", "summary"), verdict: engine.Execute},
	} {
		d := mustDecide(t, e, hist(tc.cmp), nil)
		assert.Equal(t, tc.verdict, d.Calls[0].Verdict, tc.note)
		assert.Equal(t, tc.verdict == engine.Execute, slices.Contains(d.Dispatch.Available, "send_mail"), tc.note)
		assert.Contains(t, d.Available, "send_mail", "%s: the next request does not see the evidence", tc.note)
	}
}

// TestTimedOutFilterIsNotCached: a filter that ran out of time says
// nothing about the filter; the next decision with time to spare runs it
// again and succeeds.
func TestTimedOutFilterIsNotCached(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	// A few thousand iterations per tool: far more than a millisecond,
	// well under a second.
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "filters/ops.rego", Text: `package policycheck.capabilities.ops

prepare_tools contains t.name if {
	some t in input.tools
	some i in numbers.range(1, 60)
	some j in numbers.range(1, 60)
	i * j == 3600
}
`}))
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{}`)))
	timedOut := mustDecide(t, e, h, nil, engine.WithDeadline(time.Millisecond))
	assertFailedClosed(t, reg, timedOut)

	d := mustDecide(t, e, h, nil, engine.WithDeadline(time.Minute))
	assert.Empty(t, d.Errors)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict)
	assert.Equal(t, timedOut.Fingerprint, d.Fingerprint, "same key: the fingerprint does not depend on the outcome")
}

// --- concurrency with reloads ------------------------------------------------

// TestReloadWhileDeciding: decisions in flight finish on the snapshot they
// started with while reloads swap policies; every decision is one of the
// two policies' answers, never a mixture; concurrent reloads are safe.
func TestReloadWhileDeciding(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "ops.rego")
	require.NoError(t, os.WriteFile(file, []byte(keepFilter("ops", "send_mail").Text), 0o600))
	reg := mustRegistry(t, opsRegistry)
	e := mustEngine(t, reg, engine.PolicyPaths(dir))
	h := mustHistory(t, wReq(wUser("mail")), wResp("", wCall("send_mail", "m1", `{}`), wCall("get_time", "t1", `{}`)))

	answers := map[string]bool{}
	for _, keep := range []string{"send_mail", "get_time"} {
		require.NoError(t, os.WriteFile(file, []byte(keepFilter("ops", keep).Text), 0o600))
		require.NoError(t, e.Reload(ctx))
		d := mustDecide(t, e, h, nil)
		answers[d.Calls[0].Verdict+","+d.Calls[1].Verdict] = true
	}
	require.Len(t, answers, 2)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []string
	for range 4 {
		wg.Go(func() {
			for range 20 {
				d, err := e.Decide(ctx, engine.Request{History: h})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, d.Calls[0].Verdict+","+d.Calls[1].Verdict)
				mu.Unlock()
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 5 {
				if err := e.Reload(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, g := range got {
		assert.True(t, answers[g], "decision %s is one policy's answer", g)
	}
}

// TestNarrowThenBroadLosesNoTools: seed 004's ownership rule — a request's
// visibility policy never narrows what a later request sees.
func TestNarrowThenBroadLosesNoTools(t *testing.T) {
	reg := mustRegistry(t, paymentsRegistry)
	before := slices.Clone(reg.Tools())
	e := mustEngine(t, reg, engine.PolicyPaths("testdata/rules"))
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{}`)))
	all := []string{"get_time", "read_ledger", "transfer_funds"}
	for i, group := range []string{"nobody", "finance", "guests", "finance", "interns", "nobody", "finance"} {
		d := mustDecide(t, e, h, map[string]any{"group": group})
		if group == "finance" {
			assert.Equal(t, all, d.Available, "request %d (%s)", i, group)
		}
	}
	assert.Equal(t, before, reg.Tools())
	assert.Equal(t, all, reg.ToolNames())
}

// --- model-facing messages ---------------------------------------------------

// TestMessagesQuoteNamesLikePython: the reference quotes names with
// Python's repr() (spec X4); the expected strings were produced by
// CPython's repr.
func TestMessagesQuoteNamesLikePython(t *testing.T) {
	tests := []struct{ name, repr string }{
		{"it's", "\"it's\""},
		{"say \"hi\"", "'say \"hi\"'"},
		{"both ' and \"", "'both \\' and \"'"},
		{"back\\slash", "'back\\\\slash'"},
		{"tab\u0009here", "'tab\\there'"},
		{"new\u000aline", "'new\\nline'"},
		{"\u00e9", "'\u00e9'"},
		{"\u00a0", "'\\xa0'"},
		{"\u200b", "'\\u200b'"},
		{"\U0001f600", "'\U0001f600'"},
		{"\u007f", "'\\x7f'"},
		{"\U000e0001", "'\\U000e0001'"},
		{"\u00df", "'\u00df'"},
		{"\u2028", "'\\u2028'"},
		{"\u0085", "'\\x85'"},
		{"\u00ad", "'\\xad'"},
		{"\u3000", "'\\u3000'"},
		{"\u65e5\u672c", "'\u65e5\u672c'"},
	}
	reg := mustRegistry(t, `{"capabilities": [], "tools": [{"name": "get_time"}]}`)
	e := mustEngine(t, reg)
	for _, tc := range tests {
		t.Run(tc.repr, func(t *testing.T) {
			want := "Unknown tool name: " + tc.repr + ". Available tools: 'get_time'"
			assert.Equal(t, want, engine.UnknownToolMessage(tc.name, []string{"get_time"}, false))
			// And through a decision: the name comes from the history.
			d := mustDecide(t, e, mustHistory(t, wReq(wUser("hi")), wResp("", wCall(tc.name, "c1", `{}`))), nil)
			assert.Equal(t, want, d.Calls[0].Message)
		})
	}
	assert.Equal(t, "Tool \"it's\" is not available yet: search for it first, then call it again once you've seen its schema.",
		engine.NotAvailableMessage("it's", ""))
	assert.Equal(t, "Unknown tool name: 'x'. No tools are available yet: search for the tools you need.",
		engine.UnknownToolMessage("x", nil, false))
	assert.Equal(t, "Unknown tool name: 'x'. No tools available.", engine.UnknownToolMessage("x", nil, true))
}

// TestDecideErrorsOnlyForUnrepresentableContext: a context that is not
// JSON is the one input Decide rejects.
func TestDecideErrorsOnlyForUnrepresentableContext(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	e := mustEngine(t, reg)
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{}`)))
	_, err := e.Decide(context.Background(), engine.Request{History: h, Context: map[string]any{"f": func() {}}})
	require.Error(t, err)
	for _, ctxDoc := range []any{nil, map[string]any{}, json.RawMessage(`{"a": [1, 2.5, null]}`), []int{1}, "plain"} {
		d, err := e.Decide(context.Background(), engine.Request{History: h, Context: ctxDoc})
		require.NoError(t, err, "%v", ctxDoc)
		assert.Equal(t, engine.Execute, d.Calls[0].Verdict)
	}
	empty := mustDecide(t, e, h, map[string]any{})
	none := mustDecide(t, e, h, nil)
	assert.Equal(t, empty.Fingerprint, none.Fingerprint, "nil context means {}")
}

// --- filter composition --------------------------------------------------------

// TestFiltersComposeByIntersection: a tool survives when every active
// filter keeps it; a filter of an inactive capability takes no part; when
// the filters drop every search-gated tool, search_tools is not offered.
func TestFiltersComposeByIntersection(t *testing.T) {
	reg := mustRegistry(t, `{
		"capabilities": [{"id": "ops"}, {"id": "secrets", "defer_loading": true}],
		"tools": [
			{"name": "get_time"},
			{"name": "send_mail", "capability": "ops"},
			{"name": "search_docs", "defer_loading": true},
			{"name": "secret_op", "capability": "secrets"}
		]
	}`)
	e := mustEngine(t, reg, engine.Modules(
		dropFilter("ops", "get_time", "search_docs"),
		dropFilter("secrets", "get_time", "send_mail"),
	))
	calls := wResp("", wCall("get_time", "c1", `{}`), wCall("send_mail", "c2", `{}`),
		wCall("search_tools", "c3", `{"queries": ["docs"]}`), wCall("secret_op", "c4", `{}`))
	tests := []struct {
		note      string
		msgs      []string
		available []string
		verdicts  []string
		droppedBy map[string][]string // tool -> filters named in its reasons
	}{
		{
			note:      "only ops active",
			msgs:      []string{wReq(wUser("hi")), calls},
			available: []string{"load_capability", "send_mail"},
			verdicts:  []string{engine.UnknownTool, engine.Execute, engine.UnknownTool, engine.NotAvailableYet},
			droppedBy: map[string][]string{"get_time": {"ops"}},
		},
		{
			note:      "ops and secrets active",
			msgs:      []string{wReq(wUser("hi")), wResp("", wLoadCall("l1", "secrets")), wReq(wLoadReturn("l1")), calls},
			available: []string{"load_capability", "secret_op"},
			verdicts:  []string{engine.UnknownTool, engine.UnknownTool, engine.UnknownTool, engine.Execute},
			droppedBy: map[string][]string{"get_time": {"ops", "secrets"}, "send_mail": {"secrets"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			d := mustDecide(t, e, mustHistory(t, tc.msgs...), nil)
			require.Empty(t, d.Errors)
			assert.Equal(t, tc.available, d.Available)
			assert.Equal(t, tc.available, d.Dispatch.Available)
			assert.NotContains(t, d.Available, "search_tools", "no search-gated tool survives the filters")
			for i, c := range d.Calls {
				assert.Equal(t, tc.verdicts[i], c.Verdict, c.Tool)
			}
			for tool, ids := range tc.droppedBy {
				reasons := strings.Join(callTo(t, d, tool).Reasons, "\n")
				for _, id := range ids {
					assert.Contains(t, reasons, "dropped by filter policycheck.capabilities."+id)
				}
			}
		})
	}
}

// --- the eval document -----------------------------------------------------------

// TestDecisionJSONShape: the decision marshals as design.md's eval output:
// every name list a sorted array (never null), dispatch only when the last
// message is a response, provider and tool_call_id null when absent,
// calls always present, message only on refusals.
func TestDecisionJSONShape(t *testing.T) {
	reg := mustRegistry(t, `{"capabilities": [], "tools": [{"name": "get_time"}]}`)
	e := mustEngine(t, reg)
	noID := `{"tool_name":"get_time","args":{},"part_kind":"tool-call"}`
	tests := []struct {
		note string
		msgs []string
		want string
	}{
		{
			note: "empty history",
			want: `{"fingerprint":"*","window":{"message":0,"part":0},
				"facts":{"discovered":[],"loaded":[],"returned":[],"active_capabilities":[]},
				"available":["get_time"],"advertised":["get_time"],"calls":[]}`,
		},
		{
			note: "last message is a request",
			msgs: []string{wReq(wUser("hi"))},
			want: `{"fingerprint":"*","window":{"message":0,"part":0},
				"facts":{"discovered":[],"loaded":[],"returned":[],"active_capabilities":[]},
				"available":["get_time"],"advertised":["get_time"],"calls":[]}`,
		},
		{
			note: "response without provider, call without id",
			msgs: []string{wReq(wUser("hi")), wResp("", noID, wCall("nope", "n1", `null`))},
			want: `{"fingerprint":"*","window":{"message":0,"part":0},
				"facts":{"discovered":[],"loaded":[],"returned":[],"active_capabilities":[]},
				"available":["get_time"],"advertised":["get_time"],
				"dispatch":{"provider":null,"window":{"message":0,"part":0},"loaded":[],
					"evidence":{"discovered":[],"loaded":[]},"active_capabilities":[],"available":["get_time"]},
				"calls":[
					{"tool_call_id":null,"tool":"get_time","verdict":"execute"},
					{"tool_call_id":"n1","tool":"nope","verdict":"unknown_tool",
					 "message":"Unknown tool name: 'nope'. Available tools: 'get_time'",
					 "reasons":["\"nope\" is neither a registry tool nor a framework tool present in this run"]}]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			d := mustDecide(t, e, mustHistory(t, tc.msgs...), nil)
			b, err := json.Marshal(d)
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(b, &got))
			fp, _ := got["fingerprint"].(string)
			assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, fp)
			got["fingerprint"] = "*"
			norm, _ := json.Marshal(got)
			assert.JSONEq(t, tc.want, string(norm))
		})
	}
}

// TestPolicyDirectoryDataFollowsTheBundleConvention: under a policy
// directory, data.json (or data.yaml) is data at its directory's path, as
// in a bundle and in policycheck test; any other JSON or YAML file is
// refused, naming it, rather than read by eval and unseen by tests and
// bundles (or skipped, leaving a rule that reads it with nothing).
func TestPolicyDirectoryDataFollowsTheBundleConvention(t *testing.T) {
	rule := `package policycheck.rules.limits

deny contains "transfer above the limit" if {
	input.call.tool == "transfer_funds"
	input.call.args.amount > data.limits.transfer
}
`
	reg := mustRegistry(t, paymentsRegistry)
	for _, data := range []struct{ file, text string }{
		{"limits/data.json", `{"transfer": 40}`},
		{"limits/data.yaml", "transfer: 40\n"},
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "limits.rego"), []byte(rule), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "limits"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, data.file), []byte(data.text), 0o644))
		e := mustEngine(t, reg, engine.PolicyPaths(dir))
		h := mustHistory(t, wReq(wUser("pay acme")), wResp("openai", wCall("transfer_funds", "p1", `{"amount": 50}`)))
		assert.Equal(t, engine.Denied, mustDecide(t, e, h, nil).Calls[0].Verdict, data.file)
	}
	for _, stray := range []string{"limits.json", "limits.yaml", "sub/limits.yml"} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "limits.rego"), []byte(rule), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, stray), []byte(`{"limits": {"transfer": 40}}`), 0o644))
		_, err := engine.New(context.Background(), engine.Registry(reg), engine.PolicyPaths(dir))
		var pe *engine.PolicyError
		require.ErrorAs(t, err, &pe, stray)
		require.Len(t, pe.Errors, 1)
		assert.Equal(t, filepath.Join(dir, stray), pe.Errors[0].File)
		assert.Contains(t, pe.Errors[0].Message, "not loaded as data")
	}
	// A data file named as the path itself is loaded, as opa eval -d.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "limits.rego"), []byte(rule), 0o644))
	named := filepath.Join(t.TempDir(), "limits.json")
	require.NoError(t, os.WriteFile(named, []byte(`{"limits": {"transfer": 40}}`), 0o644))
	e := mustEngine(t, reg, engine.PolicyPaths(dir, named))
	h := mustHistory(t, wReq(wUser("pay acme")), wResp("openai", wCall("transfer_funds", "p1", `{"amount": 50}`)))
	assert.Equal(t, engine.Denied, mustDecide(t, e, h, nil).Calls[0].Verdict)
}

// TestPolicyDirectoryAsAKubernetesVolume: a ConfigMap or Secret volume
// holds its files in a ..<timestamp> directory, reached through a ..data
// link and a link per file. Its policies (a complete rule among them,
// which may be defined once) and data load once, through the links;
// entries whose name begins with "." are not read (a linter's .regal/
// with its YAML beside the policies too), and a ConfigMap update (a new
// timestamped directory, ..data pointed at it) is what the next engine
// reads.
func TestPolicyDirectoryAsAKubernetesVolume(t *testing.T) {
	rule := `package policycheck.rules.limits

ceiling := data.limits.transfer

deny contains "transfer above the limit" if {
	input.call.tool == "transfer_funds"
	input.call.args.amount > ceiling
}
`
	reg := mustRegistry(t, paymentsRegistry)
	dir := t.TempDir()
	publish := func(stamp, limit string) {
		real := filepath.Join(dir, "..2026_12_02_"+stamp)
		require.NoError(t, os.MkdirAll(filepath.Join(real, "limits"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(real, "limits.rego"), []byte(rule), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(real, "limits", "data.json"), []byte(`{"transfer": `+limit+`}`), 0o644))
		tmp := filepath.Join(dir, "..data_tmp")
		require.NoError(t, os.Symlink(filepath.Base(real), tmp))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, "..data")))
	}
	publish("10_00_00", "40")
	require.NoError(t, os.Symlink(filepath.Join("..data", "limits.rego"), filepath.Join(dir, "limits.rego")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "limits"), filepath.Join(dir, "limits")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".regal"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".regal", "config.yaml"), []byte("rules: {}\n"), 0o644))

	h := mustHistory(t, wReq(wUser("pay acme")), wResp("openai", wCall("transfer_funds", "p1", `{"amount": 50}`)))
	e := mustEngine(t, reg, engine.PolicyPaths(dir))
	assert.Equal(t, engine.Denied, mustDecide(t, e, h, nil).Calls[0].Verdict)
	var loaded []string
	for _, m := range e.Modules() {
		if strings.Contains(m, "limits") {
			loaded = append(loaded, m)
		}
	}
	assert.Equal(t, []string{filepath.Join(dir, "limits.rego")}, loaded)

	publish("10_05_00", "60")
	e = mustEngine(t, reg, engine.PolicyPaths(dir))
	assert.Equal(t, engine.Execute, mustDecide(t, e, h, nil).Calls[0].Verdict, "the updated volume's limit")
}
