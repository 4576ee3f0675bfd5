package loader_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/loader"
)

// The HTTP sidecar validates histories with the decoder alone unless told
// otherwise: the JSON Schema is the published contract and, here, the
// oracle. These tests show that the decoder rejects every history the
// schema rejects (and, where both can judge, accepts what it accepts),
// beyond the hand-written table of TestHistorySchema and the random walk
// of FuzzHistorySchemaAgreement: every seed of the fuzz targets (the
// shared conformance histories, generated histories, edge cases and the
// fuzzer's saved inputs) and a systematic, hostile-style corpus built from
// them.

var agreementStride = flag.Int("agreement-stride", 8, "TestDecoderRejectsHostileMutations judges every n-th edited history")

// hostileValues replace one value at a time: one of each JSON type.
var hostileValues = []any{nil, json.Number("-1.5e3"), true, "x", []any{}, map[string]any{}}

// nearMisses also replace the values of the members the schema matches
// against fixed strings: the other strings it knows.
var nearMisses = []any{
	"", "request", "response", "tool-call", "tool-return", "tool-search", "capability-load",
	"search_tools", "load_capability", "tool_search", "builtin-tool-call", "builtin-tool-return",
	"compaction", "tool-availability-delta", "success", "complete",
}

var enumKeys = map[string]bool{"kind": true, "part_kind": true, "tool_kind": true, "tool_name": true, "outcome": true, "state": true, "finish_reason": true}

// mutations calls fn with every document obtained from doc by one edit:
// a member deleted, a value replaced by each hostile value (and near
// miss, for enumerated members), an array element removed or duplicated,
// or a member the schema knows added to an object.
func mutations(doc any, fn func(any)) {
	var walk func(key string, v any, set func(any))
	walk = func(key string, v any, set func(any)) {
		for _, h := range hostileValues {
			set(h)
			fn(doc)
		}
		if enumKeys[key] {
			for _, h := range nearMisses {
				set(h)
				fn(doc)
			}
		}
		set(v)
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				old := x[k]
				delete(x, k)
				fn(doc)
				x[k] = old
				walk(k, old, func(n any) { x[k] = n })
			}
			for _, k := range []string{"kind", "parts", "part_kind", "tool_kind", "tool_name", "args", "content", "id", "queries", "discovered_tools", "name", "tools_added", "added"} {
				if _, ok := x[k]; !ok {
					for _, h := range []any{"x", []any{"x"}, map[string]any{}} {
						x[k] = h
						fn(doc)
					}
					delete(x, k)
				}
			}
		case []any:
			for i := range x {
				walk("", x[i], func(n any) { x[i] = n })
			}
			if len(x) > 0 {
				orig := append([]any(nil), x...)
				for i := range orig {
					cut := append(append([]any{}, orig[:i]...), orig[i+1:]...)
					set(cut)
					fn(doc)
					dup := append(append([]any{}, orig[:i+1]...), orig[i:]...)
					set(dup)
					fn(doc)
				}
				set(x)
			}
		}
	}
	// The root itself is replaced too, by walk's first loop.
	var root any = doc
	walk("", root, func(n any) { doc = n })
}

// judge decodes data with the decoder and validates it with the schema,
// and fails t when the schema rejects what the decoder accepts, or (for a
// document both can read the same way) the decoder rejects what the
// schema accepts.
func judge(t *testing.T, name string, data []byte, both bool) (rejected bool) {
	t.Helper()
	_, decErr := loader.DecodeHistory("c.json", data, loader.DefaultLimits())
	doc, jsonErr := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	var schemaErr error
	if jsonErr != nil {
		schemaErr = jsonErr
	} else {
		schemaErr = loader.ValidateHistorySchema("c.json", doc)
	}
	if schemaErr != nil && decErr == nil {
		t.Fatalf("%s: the decoder accepts a history the schema rejects (%v):\n%s", name, schemaErr, data)
	}
	if both && schemaErr == nil && decErr != nil {
		t.Fatalf("%s: the decoder rejects a history the schema accepts (%v):\n%s", name, decErr, data)
	}
	return schemaErr != nil
}

// TestDecoderRejectsWhatSchemaRejects runs every seed of the fuzz targets,
// and the fuzzer's saved inputs, through both validators.
func TestDecoderRejectsWhatSchemaRejects(t *testing.T) {
	for i, s := range fuzzSeeds(t) {
		judge(t, fmt.Sprintf("seed %d", i), s, !hasDuplicateKeys(s))
	}
	saved, err := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	require.NoError(t, err)
	for _, f := range saved {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, data := range fuzzCorpusValues(t, raw) {
			// One-way only: these include invalid UTF-8 and repeated
			// keys, which encoding/json reads differently.
			judge(t, f, data, false)
		}
	}
}

// fuzzCorpusValues reads the []byte values of a "go test fuzz v1" file.
func fuzzCorpusValues(t *testing.T, raw []byte) [][]byte {
	var out [][]byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if !bytes.HasPrefix(line, []byte("[]byte(")) {
			continue
		}
		lit := line[len("[]byte(") : len(line)-1]
		var s string
		_, err := fmt.Sscanf(string(lit), "%q", &s)
		require.NoError(t, err, "corpus line %s", line)
		out = append(out, []byte(s))
	}
	return out
}

// TestDecoderRejectsHostileMutations edits every conformance history one
// value at a time (see mutations) and requires the two validators to
// agree on every edited document: re-encoded by encoding/json, they hold
// no repeated keys and only valid UTF-8, so both read the same document.
func TestDecoderRejectsHostileMutations(t *testing.T) {
	var docs, rejected int
	for i, s := range fuzzSeeds(t) {
		if len(s) > 4<<10 {
			continue // the generated histories: long, and made of the same parts
		}
		dec := json.NewDecoder(bytes.NewReader(s))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			continue
		}
		n := 0
		mutations(doc, func(m any) {
			// Every stride-th edit, starting at a different one for each
			// seed: the conformance histories share their shapes, so the
			// edits skipped in one are made in another, in a tenth of the
			// time (-agreement-stride=1 makes them all: 90k documents).
			if n++; (n+i)%*agreementStride != 0 {
				return
			}
			data, err := json.Marshal(m)
			require.NoError(t, err)
			docs++
			if judge(t, fmt.Sprintf("mutation of seed %d", i), data, true) {
				rejected++
			}
		})
	}
	t.Logf("%d edited histories, %d rejected by both validators", docs, rejected)
	require.Positive(t, rejected)
	require.Less(t, rejected, docs)
}
