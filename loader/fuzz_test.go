package loader_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/strictjson"
	"github.com/policycheck/policycheck/loader"
)

// fuzzSeeds returns the seed corpus of the history fuzz targets: every
// conformance history (when ../shared is present), a few generated
// histories and some hand-written edge cases.
func fuzzSeeds(tb testing.TB) [][]byte {
	seeds := [][]byte{
		[]byte(`[]`),
		[]byte(` [ ] `),
		[]byte(`[{"kind":"request","parts":[]}]`),
		[]byte(`[{"kind":"response","parts":[{"part_kind":"compaction"}]}]`),
		[]byte(`[{"kind":"request","parts":[{"part_kind":"tool-availability-delta","added":["a"],"tools_added":["b"]}]}]`),
		[]byte(`[{"kind":"response","parts":[{"part_kind":"tool-call","tool_kind":"capability-load","args":"{\"id\":\"v\\u00e9\"}","tool_call_id":"l"}]}]`),
		[]byte(`[{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"search_tools","content":null,"metadata":{"discovered_tools":["x"]}}]}]`),
		[]byte(`[{"kind":"response","provider_name":"openai","parts":[{"part_kind":"compaction","provider_name":"openai","provider_details":{"encrypted_content":null}}]}]`),
		[]byte(`[{"kind":"request","parts":[],"k\u0065y":"\ud83d\ude00"}]`),
		[]byte(`{"kind":"request","parts":[]}`),
		[]byte(`[{"kind":"request","parts":[]} {"kind":"request","parts":[]}]`),
		// Message boundaries where none are, for DecodeArray's goroutines
		// to guess wrong: in a string, in a tool's arguments, and real
		// ones spaced out.
		[]byte(`[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"},{\"kind\":\"request\",\"parts\":[]}"}]},{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x},{"}]}]`),
		[]byte(`[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{"h":[{"kind":"request","parts":[]},{"kind":"request","parts":[]}]}}]} , 
 {"kind":"request","parts":[]},{"kind":"request","parts":[{"part_kind":"user-prompt","content":"},{"}]}]`),
	}
	if dir, err := conformance.SharedDir(); err == nil {
		cases, err := conformance.Load(filepath.Join(dir, "conformance", "cases"))
		require.NoError(tb, err)
		for _, c := range cases {
			seeds = append(seeds, []byte(c.History))
		}
	}
	for seed := int64(1); seed <= 6; seed++ {
		o := gen.Default(int(seed) * 7)
		o.Noise = 0.15
		o.CompactionRate = 0.2
		seeds = append(seeds, gen.History(seed, o))
	}
	return seeds
}

// fuzzLimits are the default limits with a smaller byte budget, so that
// the fuzzer also exercises the limit errors.
func fuzzLimits() loader.Limits {
	lim := loader.DefaultLimits()
	lim.MaxBytes = 1 << 20
	lim.MaxPartsPerMessage = 64
	lim.MaxParts = 4096
	lim.MaxDepth = 32
	return lim
}

// FuzzDecodeHistory checks that the decoder never panics, that every error
// is an *loader.Error naming the file and a JSON pointer, and that what it
// accepts is deterministic and internally consistent.
func FuzzDecodeHistory(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	lim := fuzzLimits()
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := loader.DecodeHistory("fuzz.json", data, lim)
		requireArrayAgrees(t, data, h, err, lim)
		if err != nil {
			requireLoaderError(t, err)
			_, err2 := loader.DecodeHistory("fuzz.json", data, lim)
			require.Equal(t, err, err2, "errors are deterministic")
			_, err3 := loader.DecodeMessages("fuzz.json", data, 0, lim)
			require.Error(t, err3, "DecodeMessages accepts what DecodeHistory rejects")
			return
		}
		again, err := loader.DecodeHistory("fuzz.json", data, lim)
		require.NoError(t, err)
		require.Equal(t, h, again, "re-decoding gives an equal history")
		msgs, err := loader.DecodeMessages("fuzz.json", data, 0, lim)
		require.NoError(t, err)
		require.Equal(t, []facts.Message(h), msgs, "DecodeMessages agrees with DecodeHistory")
		requireConsistent(t, h)
	})
}

// requireArrayAgrees holds DecodeArray to DecodeHistory, which decoded
// data into h or failed with err: decoded by one to four goroutines (on
// so small an input their guesses land anywhere), alone and followed by
// the rest of a request body, data gives the same messages, each element
// the bytes encoding/json finds, and the same error. The exceptions are
// those DecodeArray's doc names: the bytes limit, and data after the
// array, which DecodeArray does not read.
func requireArrayAgrees(t *testing.T, data []byte, h facts.History, err error, lim loader.Limits) {
	t.Helper()
	var le *loader.Error
	if errors.As(err, &le) && (strings.HasPrefix(le.Msg, "input is") || strings.Contains(le.Msg, "after the history")) {
		return
	}
	var elems []json.RawMessage
	split := json.Unmarshal(data, &elems) == nil
	body := append(append([]byte{}, data...), `, "context": {"x": "},{\"kind\":\"request\",\"parts\":[]}"}}`...)
	for workers := 1; workers <= 4; workers++ {
		a, errA := loader.DecodeArray("fuzz.json", data, lim, workers)
		b, errB := loader.DecodeArray("fuzz.json", body, lim, workers)
		if err != nil {
			require.Equal(t, err, errA, "%d goroutines", workers)
			require.Error(t, errB, "%d goroutines, with more after the array", workers)
			continue
		}
		require.NoError(t, errA, "%d goroutines", workers)
		require.NoError(t, errB, "%d goroutines, with more after the array", workers)
		require.Equal(t, h, a.Messages, "%d goroutines", workers)
		require.Equal(t, a, b, "%d goroutines: what follows the array changes nothing", workers)
		require.Equal(t, len(bytes.TrimRight(data, " \t\r\n")), a.End, "%d goroutines", workers)
		require.Len(t, a.Elements, len(h))
		if split {
			for i, e := range elems {
				require.Equal(t, string(e), string(a.Elements[i]), "%d goroutines, element %d", workers, i)
			}
		}
	}
}

// FuzzHistorySchemaAgreement checks the claim of DecodeHistory's doc
// comment: the hand-written decoder and the shipped JSON Schema accept the
// same well-formed documents. One direction holds for every input: the
// decoder rejects whatever the schema (or encoding/json) rejects, so a
// service that runs the decoder alone lets nothing through that the
// schema would refuse. The other is checked where both sides read the same
// document: inputs with invalid UTF-8 (encoding/json replaces it
// silently), repeated keys (encoding/json keeps the last) and limit
// errors (the schema has no limits) are only held to the first.
func FuzzHistorySchemaAgreement(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	lim := loader.DefaultLimits()
	lim.MaxBytes = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		_, decErr := loader.DecodeHistory("fuzz.json", data, lim)
		doc, jsonErr := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if jsonErr != nil && decErr == nil && hasNumberExtension(data) {
			// Known difference: the reference's parser, and so the
			// decoder, accept NaN, Infinity and -Infinity as values
			// (TestNumberExtensions); encoding/json does not. The schema
			// check reads them as the strings policies see.
			require.NoError(t, loader.ValidateHistoryBytes("fuzz.json", data), "the schema rejects what the decoder accepts")
			return
		}
		if jsonErr != nil {
			// The kind may differ: a top-level value that is not an array
			// is rejected as such before the bytes after it are read
			// (testdata/fuzz/FuzzHistorySchemaAgreement/c2501043394e49f2).
			require.Error(t, decErr, "the decoder accepts what encoding/json rejects: %v", jsonErr)
			return
		}
		schemaErr := loader.ValidateHistorySchema("fuzz.json", doc)
		if schemaErr != nil {
			require.Error(t, decErr, "the decoder accepts what the schema rejects: %v", schemaErr)
		}
		var le *loader.Error
		if !utf8.Valid(data) || (errors.As(decErr, &le) && le.Kind == loader.KindLimit) {
			return
		}
		if errors.As(decErr, &le) && strings.Contains(le.Msg, "lone UTF-16 surrogate") {
			// Known difference: encoding/json replaces a lone surrogate
			// escape with U+FFFD; the reference rejects it, and so does
			// the decoder (TestLoneSurrogates).
			return
		}
		if decErr != nil {
			require.NotEqual(t, loader.KindSyntax, le.Kind, "the decoder rejects what encoding/json accepts: %v", decErr)
		}
		if hasDuplicateKeys(data) {
			// Known difference: with a key repeated in one object,
			// encoding/json keeps the last value while the decoder
			// validates every occurrence of "parts"
			// (testdata/fuzz/FuzzHistorySchemaAgreement/1c5d1bdd3d3b951f).
			return
		}
		if decErr == nil {
			require.NoError(t, schemaErr, "the schema rejects what the decoder accepts")
		} else {
			require.Error(t, schemaErr, "the decoder rejects what the schema accepts: %v", decErr)
		}
	})
}

// hasDuplicateKeys reports whether some object of a well-formed JSON
// document repeats a key.
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object    bool
		keys      map[string]bool
		expectKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expectKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.expectKey = false
				continue
			}
		}
		if top != nil && top.object {
			top.expectKey = true // this token is a value, or the closing brace
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// requireLoaderError checks the error contract of the decoder.
func requireLoaderError(t *testing.T, err error) {
	t.Helper()
	var le *loader.Error
	require.True(t, errors.As(err, &le), "error %T is not a *loader.Error: %v", err, err)
	require.NotEmpty(t, le.File)
	require.True(t, le.Pointer == "" || strings.HasPrefix(le.Pointer, "/"), "bad pointer %q", le.Pointer)
	require.Contains(t, []loader.ErrorKind{loader.KindSyntax, loader.KindSchema, loader.KindLimit}, le.Kind)
	require.NotEmpty(t, le.Msg)
	require.NotEmpty(t, err.Error())
	if le.Kind == loader.KindSyntax {
		require.Positive(t, le.Line)
		require.Positive(t, le.Column)
	}
}

// requireConsistent checks the invariants of a decoded history that the
// derivation in package facts relies on.
func requireConsistent(t *testing.T, h facts.History) {
	t.Helper()
	for m, msg := range h {
		at := func(p int) string { return fmt.Sprintf("/%d/parts/%d", m, p) }
		require.Contains(t, []facts.MessageKind{facts.Request, facts.Response}, msg.Kind, "/%d", m)
		if !msg.HasProvider {
			require.Empty(t, msg.Provider, "/%d", m)
		}
		if msg.Kind == facts.Request {
			require.False(t, msg.HasProvider, "/%d: a request has no serving provider", m)
		}
		for p, part := range msg.Parts {
			require.NotContains(t, part.Kind.String(), "PartKind(", at(p))
			require.True(t, part.Kind.AllowedIn(msg.Kind), "%s: %s in a %s", at(p), part.Kind, msg.Kind)
			tool := part.Kind == facts.ToolCall || part.Kind == facts.ToolReturn ||
				part.Kind == facts.BuiltinToolCall || part.Kind == facts.BuiltinToolReturn
			switch part.ToolKind {
			case facts.ToolKindNone:
			case facts.ToolKindSearch:
				require.True(t, tool, at(p))
				want := facts.SearchTool
				if part.Kind == facts.BuiltinToolCall || part.Kind == facts.BuiltinToolReturn {
					want = "tool_search"
				}
				require.Equal(t, want, part.ToolName, at(p))
			case facts.ToolKindLoad:
				require.Contains(t, []facts.PartKind{facts.ToolCall, facts.ToolReturn}, part.Kind, at(p))
				require.Equal(t, facts.LoadCapabilityTool, part.ToolName, at(p))
			default:
				require.Failf(t, "unknown tool kind", "%s: %d", at(p), part.ToolKind)
			}
			if !tool && part.Kind != facts.RetryPrompt {
				require.Empty(t, part.ToolName, at(p))
			}
			if !part.HasToolCallID {
				require.Empty(t, part.ToolCallID, at(p))
			}
			if !part.HasProvider {
				require.Empty(t, part.Provider, at(p))
			}
			if part.HasPayload {
				require.Equal(t, facts.Compaction, part.Kind, at(p))
			}
			if part.HasLoadID {
				require.Equal(t, facts.ToolCall, part.Kind, at(p))
				require.Equal(t, facts.ToolKindLoad, part.ToolKind, at(p))
			} else {
				require.Empty(t, part.LoadID, at(p))
			}
			if part.Outcome != facts.OutcomeSuccess {
				require.Contains(t, []facts.PartKind{facts.ToolReturn, facts.BuiltinToolReturn}, part.Kind, at(p))
				require.LessOrEqual(t, part.Outcome, facts.OutcomeInterrupted, at(p))
			}
			if part.Args != nil {
				require.Contains(t, []facts.PartKind{facts.ToolCall, facts.BuiltinToolCall}, part.Kind, at(p))
				require.True(t, json.Valid(part.Args), "%s: args %q", at(p), part.Args)
				require.Contains(t, "{\"n", string(part.Args[:1]), at(p))
			}
			// Only the four representations of spec D1 reveal.
			if part.Reveals != nil {
				switch {
				case part.Kind == facts.ToolAvailabilityDelta:
				case part.Kind == facts.ToolReturn && part.ToolKind == facts.ToolKindSearch:
				case part.Kind == facts.BuiltinToolReturn && part.ToolKind == facts.ToolKindSearch:
				case part.Kind == facts.ToolReturn && part.ToolKind == facts.ToolKindNone && part.ToolName == facts.SearchTool:
				default:
					require.Failf(t, "unexpected reveals", "%s: %s %q reveals %q", at(p), part.Kind, part.ToolKind, part.Reveals)
				}
			}
			if part.Kind == facts.ToolAvailabilityDelta {
				require.NotNil(t, part.Reveals, "%s: a delta's names are never nil", at(p))
			}
		}
	}
	for _, w := range []facts.Position{facts.ConservativeWindow(h), facts.AnchoredWindow(h)} {
		if w == (facts.Position{}) {
			continue
		}
		require.Less(t, w.Message, len(h))
		require.Less(t, w.Part, len(h[w.Message].Parts))
		require.Equal(t, facts.Compaction, h[w.Message].Parts[w.Part].Kind, "a window starts at a compaction part")
		require.Equal(t, facts.Response, h[w.Message].Kind)
	}
}

// TestHasDuplicateKeys checks the fuzz helper itself.
func TestHasDuplicateKeys(t *testing.T) {
	for in, want := range map[string]bool{
		`[]`: false, `{"a":1,"a":2}`: true, `{"a":{"a":1},"b":[{"a":1},{"a":2}]}`: false,
		`[{"parts":[{"x":"y"}],"parts":[],"kind":"response"}]`: true,
		`{"a":{"b":1,"b":2}}`: true, `{"a":[1,{"c":1}],"b":{"c":2},"c":3}`: false, `{"a":{},"a":1}`: true,
	} {
		if hasDuplicateKeys([]byte(in)) != want {
			t.Errorf("%s: want %v", in, want)
		}
	}
}

// hasNumberExtension reports whether data holds NaN or Infinity outside
// its strings.
func hasNumberExtension(data []byte) bool {
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case 'N', 'I':
			return true
		}
	}
	return false
}

// FuzzSkipJSON holds SkipJSON to an oracle written apart from it
// (internal/testkit/strictjson): it accepts a document exactly when encoding/json
// does, the text is strict (UTF-8, surrogate escapes in pairs) and it
// nests no deeper than the limit, and then it ends where the value does.
// A refusal is an *Error with an offset in the document.
func FuzzSkipJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[1, -0.5e3, true, null, "x"]`, `{"a": {"b": ["c"]}} `, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`,
		"\"\xff\"", `NaN`, `-Infinity`, `[Infinity]`, `{"a" 1}`, `[1,]`, `01`, `"\q"`, `[[[[[[]]]]]]`, ` 1 `, `{"a":1}x`,
	} {
		f.Add([]byte(seed), uint8(4))
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		maxDepth := int(depth%8) + 1
		end, err := loader.SkipJSON("fuzz.json", data, 0, maxDepth)
		rest := []byte(nil)
		if err == nil {
			rest = bytes.TrimLeft(data[end:], " \t\r\n")
		}
		want := strictjson.Valid(data) && strictjson.Depth(data) <= maxDepth
		if got := err == nil && len(rest) == 0; got != want {
			t.Fatalf("SkipJSON accepts=%v (end %d, err %v), the oracle %v, on %q (depth %d)", got, end, err, want, data, maxDepth)
		}
		if err != nil {
			var le *loader.Error
			require.True(t, errors.As(err, &le), "%T", err)
			require.LessOrEqual(t, le.Offset, len(data))
		}
	})
}
