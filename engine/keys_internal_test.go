package engine

import "testing"

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
