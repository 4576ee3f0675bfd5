package trust_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/trust"
)

// ExampleCallDigest: the digest an approval carries back. It covers the
// call's id, tool and arguments, so an approval for one call never binds
// to another.
func ExampleCallDigest() {
	id := "t2"
	shown := trust.CallDigest(&id, "transfer_funds", []byte(`{"to": "savings", "amount": 5000}`))
	// Key order and whitespace do not matter; a string holding the object
	// is the object.
	same := trust.CallDigest(&id, "transfer_funds", []byte(`"{\"amount\":5000,\"to\":\"savings\"}"`))
	other := trust.CallDigest(&id, "transfer_funds", []byte(`{"to": "savings", "amount": 5001}`))
	fmt.Println(shown == same, shown == other)
	// Output: true false
}

// TestCallDigestCanonicalForm pins the documented canonical form: the
// SHA-256 of the compact JSON with sorted keys, numbers as written and no
// HTML escaping.
func TestCallDigestCanonicalForm(t *testing.T) {
	id := "t<1>"
	cases := []struct {
		note      string
		id        *string
		tool      string
		args      string
		canonical string
	}{
		{"sorted keys, compact", &id, "pay", `{ "b": 1, "a": [2.50, "x&y"] }`,
			`{"args":{"a":[2.50,"x&y"],"b":1},"tool":"pay","tool_call_id":"t<1>"}`},
		{"no id, no args", nil, "pay", ``, `{"args":null,"tool":"pay","tool_call_id":null}`},
		{"args that are not JSON are null", nil, "pay", `{nope`, `{"args":null,"tool":"pay","tool_call_id":null}`},
		{"a string that is not an object stays a string", nil, "pay", `"[1]"`, `{"args":"[1]","tool":"pay","tool_call_id":null}`},
	}
	for _, tc := range cases {
		sum := sha256.Sum256([]byte(tc.canonical))
		want := "sha256:" + hex.EncodeToString(sum[:])
		if got := trust.CallDigest(tc.id, tc.tool, []byte(tc.args)); got != want {
			t.Errorf("%s: got %s, want the digest of %s", tc.note, got, tc.canonical)
		}
	}
}

// TestContextDigestKeepsItsBytes pins the context digest, part of every
// decision's fingerprint, to the bytes it always had: the canonical JSON
// with sorted keys and numbers as written, and <, > and & escaped as
// encoding/json escapes them by default (unlike the call digest).
func TestContextDigestKeepsItsBytes(t *testing.T) {
	var ctx any
	dec := json.NewDecoder(strings.NewReader(`{"z": 1.50, "a": "<b>&"}`))
	dec.UseNumber()
	if err := dec.Decode(&ctx); err != nil {
		t.Fatal(err)
	}
	got, err := trust.ContextDigest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"a":"\u003cb\u003e\u0026","z":1.50}`))
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("ContextDigest = %s, want %s", got, want)
	}
	empty, _ := trust.ContextDigest(map[string]any{})
	if sum := sha256.Sum256([]byte("{}")); empty != hex.EncodeToString(sum[:]) {
		t.Errorf("the empty context's digest is %s", empty)
	}
}
