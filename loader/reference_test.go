package loader_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// The last edge classes where the loader differed from the reference's
// validator (pydantic-ai's ModelMessagesTypeAdapter over pydantic-core's
// JSON parser): each case states the reference's behaviour.

// TestNumberExtensions: the reference's parser accepts NaN, Infinity and
// -Infinity as values anywhere a value of any type is allowed (tool
// arguments, return content, metadata). The loader accepts them there too
// and hands them to policies as the strings "NaN", "Infinity" and
// "-Infinity": they are not JSON numbers, so a policy's is_number check
// fails on them and arithmetic on them is an error.
func TestNumberExtensions(t *testing.T) {
	call := `{"part_kind": "tool-call", "tool_name": "transfer_funds", "tool_call_id": "t1",
		"args": {"amount": Infinity, "low": -Infinity, "odd": [NaN, 1.5, "NaN in a string", "say \"Infinity\""]}}`
	ret := `{"part_kind": "tool-return", "tool_name": "transfer_funds", "tool_call_id": "t1", "content": {"fee": NaN}, "metadata": {"x": -Infinity}}`
	src := []byte(hist(req(userPrompt), resp(call), req(ret), resp(call)))
	h, err := loader.DecodeHistory("h.json", src, loader.DefaultLimits())
	require.NoError(t, err)
	require.NoError(t, loader.ValidateHistoryBytes("h.json", src), "the schema check at the boundary agrees")
	want := `{"amount": "Infinity", "low": "-Infinity", "odd": ["NaN", 1.5, "NaN in a string", "say \"Infinity\""]}`
	assert.JSONEq(t, want, string(h[1].Parts[0].Args))
	assert.JSONEq(t, want, string(h[3].Parts[0].Args))
	reg, err := facts.NewRegistry(nil, []facts.Tool{{Name: "transfer_funds"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"transfer_funds"}, facts.Derive(h, reg).Returned)

	// Arguments without an extension are handed over as they are, even
	// after one was read elsewhere in the history.
	plain := `{"part_kind": "tool-call", "tool_name": "get_time", "tool_call_id": "g1", "args": {"tz": "UTC", "n": -1}}`
	h, err = loader.DecodeHistory("h.json", []byte(hist(req(ret), resp(plain))), loader.DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, `{"tz": "UTC", "n": -1}`, string(h[1].Parts[0].Args))

	for name, bad := range map[string]string{
		"lower case":             `{"part_kind": "tool-call", "tool_name": "f", "args": {"a": nan}}`,
		"plus sign":              `{"part_kind": "tool-call", "tool_name": "f", "args": {"a": +Infinity}}`,
		"negative NaN":           `{"part_kind": "tool-call", "tool_name": "f", "args": {"a": -NaN}}`,
		"truncated":              `{"part_kind": "tool-call", "tool_name": "f", "args": {"a": Infinit}}`,
		"args that are a number": `{"part_kind": "tool-call", "tool_name": "f", "args": NaN}`,
		"a number-typed field":   `{"part_kind": "tool-call", "tool_name": "f", "tool_call_id": Infinity}`,
	} {
		_, err := loader.DecodeHistory("h.json", []byte(hist(resp(bad))), loader.DefaultLimits())
		assert.Error(t, err, name)
	}
}

// TestLoneSurrogates: the reference's parser rejects a \u escape of a
// trailing surrogate on its own, and of a leading surrogate not followed
// by the escape of a trailing one; replacing them by U+FFFD would let two
// different names collide.
func TestLoneSurrogates(t *testing.T) {
	named := func(name string) string {
		return hist(req(`{"part_kind": "tool-availability-delta", "tools_added": ["` + name + `"]}`))
	}
	for _, bad := range []string{`a\ud800`, `\ud800b`, `\udc00`, `\ud800\u0041`, `\ud800\ud800`, `\ud800\`, `x\udfff`} {
		_, err := loader.DecodeHistory("h.json", []byte(named(bad)), loader.DefaultLimits())
		var le *loader.Error
		require.True(t, errors.As(err, &le), "%s: %v", bad, err)
		assert.Equal(t, loader.KindSyntax, le.Kind, bad)
		assert.Contains(t, le.Msg, "lone UTF-16 surrogate", bad)
	}
	h, err := loader.DecodeHistory("h.json", []byte(named(`grin_\ud83d\ude00_\u00e9`)), loader.DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, []string{"grin_\U0001F600_é"}, h[0].Parts[0].Reveals)
}

// TestDefaultDepthMatchesTheReference: the reference's parser (jiter,
// with a limit of 200) steps down a level only to read a container's
// first value, so what it limits is that every value lie inside at most
// 200 arrays and objects, the history's own array counting as one: an
// empty [] or {} adds no level, and a document may be 201 levels deep when
// its deepest level is empty. The history array, a message, its parts
// array and a part make four levels, so a value nested n levels below a
// part's args or content lies inside 4+n; at n = 196 the reference
// accepts the history, at 197 it refuses it, whatever the innermost value.
func TestDefaultDepthMatchesTheReference(t *testing.T) {
	require.Equal(t, 200, loader.DefaultLimits().MaxDepth)
	require.Equal(t, loader.DefaultMaxDepth, loader.DefaultLimits().MaxDepth)
	objects := func(n int, inner string) string {
		return strings.Repeat(`{"a": `, n) + inner + strings.Repeat("}", n)
	}
	arrays := func(n int, inner string) string { return strings.Repeat("[", n) + inner + strings.Repeat("]", n) }
	call := func(args string) string {
		return hist(resp(`{"part_kind": "tool-call", "tool_name": "f", "tool_call_id": "c1", "args": ` + args + `}`))
	}
	ret := func(content string) string {
		return hist(req(`{"part_kind": "tool-return", "tool_name": "f", "tool_call_id": "c1", "content": ` + content + `}`))
	}
	var le *loader.Error
	for _, c := range []struct {
		name string
		doc  func(n int) string // a value inside 4+n arrays and objects
		ptr  func(n int) string // the pointer of the container at level n below the part
	}{
		{"arguments, a number innermost", func(n int) string { return call(objects(n, "1")) },
			func(n int) string { return "/0/parts/0/args" + strings.Repeat("/a", n-1) }},
		// The held-out corpus's case: at n = 196 the document is 201 deep.
		{"arguments, an empty object innermost", func(n int) string { return call(objects(n, "{}")) },
			func(n int) string { return "/0/parts/0/args" + strings.Repeat("/a", n-1) }},
		{"arguments, arrays and an empty array innermost", func(n int) string { return call(objects(1, arrays(n-1, "[]"))) },
			func(n int) string { return "/0/parts/0/args/a" + strings.Repeat("/0", n-2) }},
		{"return content, a string innermost", func(n int) string { return ret(arrays(n, `"x"`)) },
			func(n int) string { return "/0/parts/0/content" + strings.Repeat("/0", n-1) }},
		{"return content, an empty array innermost", func(n int) string { return ret(objects(n, "[]")) },
			func(n int) string { return "/0/parts/0/content" + strings.Repeat("/a", n-1) }},
		{"return content, an empty object innermost", func(n int) string { return ret(arrays(n, "{}")) },
			func(n int) string { return "/0/parts/0/content" + strings.Repeat("/0", n-1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, lim := range []loader.Limits{loader.DefaultLimits(), {}} { // a zero limit selects the default
				src := []byte(c.doc(196))
				h, err := loader.DecodeHistory("fuzz.json", src, lim)
				require.NoError(t, err, "a value inside 200 arrays and objects")
				requireArrayAgrees(t, src, h, err, lim)

				src = []byte(c.doc(197))
				_, err = loader.DecodeHistory("fuzz.json", src, lim)
				require.True(t, errors.As(err, &le), "%v", err)
				assert.Equal(t, loader.KindLimit, le.Kind)
				assert.Equal(t, "nesting deeper than the limit of 200", le.Msg)
				assert.Equal(t, c.ptr(197), le.Pointer, "the container that would put a value inside 201")
				requireArrayAgrees(t, src, nil, err, lim)
			}
		})
	}

	// The same count under a limit of one's own: an empty container
	// adds no level at any limit.
	lim := loader.Limits{MaxDepth: 6}
	_, err := loader.DecodeHistory("h.json", []byte(call(objects(2, "[]"))), lim)
	require.NoError(t, err, "[] inside 6")
	_, err = loader.DecodeHistory("h.json", []byte(call(objects(2, "[1]"))), lim)
	require.Error(t, err, "1 inside 7")
	_, err = loader.DecodeHistory("h.json", []byte(`[]`), loader.Limits{MaxDepth: 1})
	require.NoError(t, err)
	_, err = loader.DecodeHistory("h.json", []byte(hist(req())), loader.Limits{MaxDepth: 1})
	require.Error(t, err, "a message's parts array lies inside 2")

	// The other JSON (a context, a registry, approvals) is counted alike.
	_, serr := wire.Skip("context.json", []byte(`{"a": `+arrays(199, "[]")+`}`), 0, loader.DefaultMaxDepth)
	require.Nil(t, serr, "[] inside 200")
	_, serr = wire.Skip("context.json", []byte(`{"a": `+arrays(200, "[]")+`}`), 0, loader.DefaultMaxDepth)
	require.NotNil(t, serr, "[] inside 201")
	assert.Equal(t, "/a"+strings.Repeat("/0", 199), serr.Pointer)
}

// TestStringArgumentsDepth: string tool arguments are one JSON string to
// the reference's validator, whatever they spell, so their nesting never
// counts toward the history's. The reference parses them on their own
// (pydantic_core.from_json, with its fixed limit of 200) to read a typed
// load call's capability id: the count starts again at the string's
// outermost value, and a string the parser refuses holds no id.
func TestStringArgumentsDepth(t *testing.T) {
	objects := func(n int, inner string) string {
		return strings.Repeat(`{"a": `, n) + inner + strings.Repeat("}", n)
	}
	str := func(v string) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	// Far deeper than a history may nest, as a string: accepted.
	deep := objects(5000, "[]")
	src := hist(resp(`{"part_kind": "tool-call", "tool_name": "f", "tool_call_id": "c1", "args": `+str(deep)+`}`),
		req(`{"part_kind": "tool-return", "tool_name": "f", "tool_call_id": "c1", "content": `+str(deep)+`}`))
	h, err := loader.DecodeHistory("fuzz.json", []byte(src), loader.DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, str(deep), string(h[0].Parts[0].Args))
	requireArrayAgrees(t, []byte(src), h, err, loader.DefaultLimits())

	load := func(args string) (id string, ok bool) {
		t.Helper()
		src := hist(resp(`{"part_kind": "tool-call", "tool_kind": "capability-load", "tool_name": "load_capability", "tool_call_id": "l1", "args": ` + str(args) + `}`))
		for _, lim := range []loader.Limits{loader.DefaultLimits(), {MaxDepth: 8}} { // the string's limit is the reference's, not the history's
			h, err := loader.DecodeHistory("h.json", []byte(src), lim)
			require.NoError(t, err, "any string is valid args")
			p := h[0].Parts[0]
			if lim.MaxDepth == loader.DefaultMaxDepth {
				id, ok = p.LoadID, p.HasLoadID
			} else {
				require.Equal(t, []any{id, ok}, []any{p.LoadID, p.HasLoadID}, "under --max-depth 8")
			}
		}
		return id, ok
	}
	// {"id": ..., "x": <n objects around {}>}: {} lies inside 1+n.
	id, ok := load(`{"id": "refunds", "x": ` + objects(199, "{}") + `}`)
	assert.True(t, ok, "{} inside 200: the reference reads the id")
	assert.Equal(t, "refunds", id)
	_, ok = load(`{"id": "refunds", "x": ` + objects(200, "{}") + `}`)
	assert.False(t, ok, "{} inside 201: the reference's parser refuses the string")
	_, ok = load(`{"x": ` + objects(200, "{}") + `, "id": "refunds"}`)
	assert.False(t, ok, "refused before the id is read")

	// The rest of the reference's parser rules hold in the string too.
	for args, want := range map[string]string{
		`{"id": "refunds", "limit": NaN}`:      "refunds", // from_json accepts the number extensions
		`{"id": "refunds", "x": [Infinity]}`:   "refunds",
		` {"id": "a", "id": "refunds"} `:       "refunds", // the last of a repeated key
		`{"\u0069d": "refunds"}`:               "refunds",
		`{"id": "a\ud800"}`:                    "", // a lone surrogate: refused
		`{"id": "refunds", "x": "a\udc00"}`:    "",
		`{"id": "refunds", "id": 5}`:           "", // a non-string id is no id
		`{"id": "refunds"} x`:                  "",
		`{"id": "refunds",}`:                   "",
		`["refunds"]`:                          "",
		``:                                     "",
		`{"id": "refunds", "n": -Infinity}   `: "refunds",
	} {
		id, ok := load(args)
		assert.Equal(t, want != "", ok, args)
		assert.Equal(t, want, id, args)
	}
}

// TestLegacyVendorAliases: vendor_details and vendor_id are read only when
// provider_details and provider_response_id are absent; next to them, the
// reference ignores the alias whatever it holds.
func TestLegacyVendorAliases(t *testing.T) {
	response := func(keys string) string {
		return `[{"kind": "response", ` + keys + `, "parts": [` + textPart + `]}]`
	}
	for _, ok := range []string{
		`"provider_details": {"a": 1}, "vendor_details": "not an object"`,
		`"provider_details": null, "vendor_details": 7`,
		`"provider_response_id": "r1", "vendor_id": {"not": "a string"}`,
		`"vendor_details": {"a": 1}, "vendor_id": "r1"`,
		`"vendor_details": null`,
	} {
		src := response(ok)
		_, err := loader.DecodeHistory("h.json", []byte(src), loader.DefaultLimits())
		assert.NoError(t, err, ok)
		assert.NoError(t, loader.ValidateHistorySchema("h.json", decode(t, src)), "schema: %s", ok)
	}
	for _, bad := range []string{
		`"vendor_details": "not an object"`,
		`"vendor_id": 5`,
		`"provider_details": "not an object", "vendor_details": {"a": 1}`,
	} {
		src := response(bad)
		_, err := loader.DecodeHistory("h.json", []byte(src), loader.DefaultLimits())
		assert.Error(t, err, bad)
		assert.Error(t, loader.ValidateHistorySchema("h.json", decode(t, src)), "schema: %s", bad)
	}
}

// TestSchemaCheckReadsExtensionsOnly: the boundary schema check reads the
// number extensions as strings, and only the exact literals.
func TestSchemaCheckReadsExtensionsOnly(t *testing.T) {
	msg := func(v string) []byte {
		return []byte(`[{"kind": "request", "metadata": {"x": ` + v + `}, "parts": []}]`)
	}
	for _, ok := range []string{"NaN", "Infinity", "-Infinity", `["NaN", NaN]`} {
		assert.NoError(t, loader.ValidateHistoryBytes("h.json", msg(ok)), ok)
	}
	for _, bad := range []string{"Nab", "Infinite", "-Inf", "nan"} {
		assert.Error(t, loader.ValidateHistoryBytes("h.json", msg(bad)), bad)
	}
}
