package mask

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestContext: each JSON pointer removes its value from the logged
// context, escapes read as RFC 6901 has them, and the empty pointer masks
// the whole context; a string that is not a pointer is refused
// (CheckPointer) rather than matching nothing.
func TestContext(t *testing.T) {
	ctx := json.RawMessage(`{"user": {"email": "a@b", "id": 7}, "a/b": 1, "m~n": 2, "list": [1, 2]}`)
	for _, tc := range []struct {
		masks []string
		want  string
	}{
		{[]string{"/user/email"}, `{"user": {"id": 7}, "a/b": 1, "m~n": 2, "list": [1, 2]}`},
		{[]string{"/a~1b", "/m~0n"}, `{"user": {"email": "a@b", "id": 7}, "list": [1, 2]}`},
		{[]string{"/list/0"}, `{"user": {"email": "a@b", "id": 7}, "a/b": 1, "m~n": 2, "list": [null, 2]}`},
		{[]string{"/user", ""}, `{}`},
	} {
		for _, m := range tc.masks {
			if err := CheckPointer(m); err != nil {
				t.Fatalf("%q: %v", m, err)
			}
		}
		got, _ := json.Marshal(Context(ctx, tc.masks))
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal([]byte(tc.want), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%q: got %s, want %s", tc.masks, got, tc.want)
		}
	}
	for _, bad := range []string{"user", "/a~", "/a~2", "#/user"} {
		if CheckPointer(bad) == nil {
			t.Errorf("%q is accepted", bad)
		}
	}
}
