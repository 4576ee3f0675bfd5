package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
)

// TestKeysAreUnambiguous: ids may hold any bytes (a registry id is any
// non-empty string), so the active set and the cache key are spelled with
// length prefixes: no two different sets or keys share a spelling, and a
// filter result is never answered from another set's entry.
func TestKeysAreUnambiguous(t *testing.T) {
	cases := []struct {
		note string
		a, b []string
	}{
		{"a separator inside an id", []string{"a\x01b"}, []string{"a", "b"}},
		{"a length prefix inside an id", []string{"1:a"}, []string{"a"}},
		{"empty set vs one empty-looking id", nil, []string{""}},
		{"a colon and digits", []string{"2:ab"}, []string{"2", "ab"}},
	}
	for _, tc := range cases {
		if idsKey(tc.a) == idsKey(tc.b) {
			t.Errorf("%s: %q and %q share the key %q", tc.note, tc.a, tc.b, idsKey(tc.a))
		}
		rev := "r"
		if cacheKey(rev, rev, "x", idsKey(tc.a), rev) == cacheKey(rev, rev, "x", idsKey(tc.b), rev) {
			t.Errorf("%s: cache keys collide", tc.note)
		}
	}
	if cacheKey("p", "r", "ab", idsKey([]string{"c"}), "d") == cacheKey("p", "r", "a", "b"+idsKey([]string{"c"}), "d") {
		t.Error("the capability id and the active set run together")
	}
}

// TestInputKeyIsCanonicalAndUnambiguous: the decision memo's key
// (inputKey) tells apart documents that differ in any value, type,
// nesting or boundary between strings, and does not depend on the order
// in which an object's keys or a set's elements were inserted.
func TestInputKeyIsCanonicalAndUnambiguous(t *testing.T) {
	differ := [][2]string{
		{`{"a": "bc"}`, `{"ab": "c"}`},
		{`["a", "b"]`, `["ab"]`},
		{`["a", "b"]`, `{"a", "b"}`},
		{`{"x": "1"}`, `{"x": 1}`},
		{`{"x": null}`, `{"x": false}`},
		{`{"x": true}`, `{"x": false}`},
		{`{"x": []}`, `{"x": set()}`},
		{`{"x": {}}`, `{"x": []}`},
		{`[["a"], "b"]`, `[["a", "b"]]`},
		{`{"x": {"y": 1}}`, `{"x": {"y": 2}}`},
		{`{"s": {"a", "b"}}`, `{"s": {"a", "b", "c"}}`},
		{`["", ""]`, `[""]`},
		{`{"k": "v", "l": "w"}`, `{"k": "vl", "": "w"}`},
	}
	for _, p := range differ {
		a, b := ast.MustParseTerm(p[0]).Value, ast.MustParseTerm(p[1]).Value
		if inputKey(a) == inputKey(b) {
			t.Errorf("%s and %s share a key", p[0], p[1])
		}
	}
	same := [][2]string{
		{`{"a": 1, "b": {"c", "d"}}`, `{"b": {"d", "c"}, "a": 1}`},
		{`{"x": {"p": [1, 2], "q": null}}`, `{"x": {"q": null, "p": [1, 2]}}`},
	}
	for _, p := range same {
		a, b := ast.MustParseTerm(p[0]).Value, ast.MustParseTerm(p[1]).Value
		if inputKey(a) != inputKey(b) {
			t.Errorf("%s and %s are one document but have different keys", p[0], p[1])
		}
	}
	// A string longer than the digest's buffer is written through whole.
	long := strings.Repeat("x", 2000)
	if inputKey(ast.String(long)) == inputKey(ast.String(long+"y")) {
		t.Error("long strings that differ at the end share a key")
	}
}

// TestMemoEntryRoundTrip: a remembered result comes back with the same
// name lists, sorted, whether their names are the registry's or not, as
// new slices each time; everything else comes back as it was.
func TestMemoEntryRoundTrip(t *testing.T) {
	var names []string
	for i := range 130 { // more than two words of bits
		names = append(names, fmt.Sprintf("tool_%03d", i))
	}
	known := newNameTerms(names)
	res := &policyResult{
		available:         []string{"a_unknown", "tool_000", "tool_063", "tool_064", "tool_129", "zz_unknown"},
		advertised:        []string{"tool_000", "tool_129"},
		dispatchAvailable: []string{},
		hidden:            slices.Clone(names),
		wouldHide:         []string{"tool_064"},
		verdicts:          []policyVerdict{{verdict: "execute", rule: "gate", wouldDeny: []ruleAnswer{{pkg: "p", reason: "r"}}}},
		ruleErrors:        []flaggedValue{},
	}
	want := *res
	e := packEntry(res, &known)
	if !reflect.DeepEqual(*res, want) {
		t.Fatal("packing changed the result it was given")
	}
	for range 2 {
		got := e.unpack(&known)
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
		}
		got.available[0] = "scribbled"
	}
}

// TestContextCache: a context is converted once and then answered from
// the cache by its JSON encoding, with the same value and digest as a
// fresh conversion; a context changed after a decision, or spelled with
// its keys in another order, is never answered with another's value; one
// too large is converted every time and not kept.
func TestContextCache(t *testing.T) {
	reg, err := facts.NewRegistry(nil, []facts.Tool{{Name: "get_time"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), Registry(reg))
	if err != nil {
		t.Fatal(err)
	}
	s := e.snap.Load()
	convert := func(doc any) (*ast.Term, string) {
		t.Helper()
		term, digest, err := s.contextValue(doc)
		if err != nil {
			t.Fatal(err)
		}
		return term, digest
	}
	ctxDoc := map[string]any{"user": "ada", "group": "ops"}
	t1, d1 := convert(ctxDoc)
	t2, d2 := convert(map[string]any{"group": "ops", "user": "ada"})
	if t1 != t2 || d1 != d2 {
		t.Error("the same context was converted twice")
	}
	raw, _ := json.Marshal(ctxDoc)
	want, wantDigest, err := convertContext(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !t1.Equal(want) || d1 != wantDigest {
		t.Errorf("cached %v %s, converted %v %s", t1, d1, want, wantDigest)
	}

	// The caller changes its map: a new encoding, a new value.
	ctxDoc["group"] = "admin"
	t3, d3 := convert(ctxDoc)
	if d3 == d1 || t3.Equal(t1) {
		t.Errorf("a changed context was answered from the cache: %v", t3)
	}
	if got := t3.Value.(ast.Object).Get(ast.StringTerm("group")); !got.Equal(ast.StringTerm("admin")) {
		t.Errorf("group = %v, want admin", got)
	}

	// Keys in another order, as raw JSON: a different encoding, the same
	// digest (the digest is over the re-encoded document).
	_, d4 := convert(json.RawMessage(`{"user":"ada","group":"ops"}`))
	if d4 != d1 {
		t.Errorf("digest of the reordered context %s, want %s", d4, d1)
	}

	n, _ := s.contexts.Stats()
	big := map[string]any{"blob": strings.Repeat("x", maxCachedContext)}
	b1, _ := convert(big)
	b2, _ := convert(big)
	if m, _ := s.contexts.Stats(); b1 == b2 || m != n {
		t.Errorf("a context over %d bytes was kept", maxCachedContext)
	}
}
