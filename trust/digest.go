package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/policycheck/policycheck/facts"
)

// CheckCallArgs reports why a call's raw arguments cannot be read exactly
// one way, as the engine reads them before any rule (facts.ReadArgs: a
// key twice in an object, data after string arguments' JSON, a number
// beyond facts.MaxArgsNumberDigits or facts.MaxArgsNumberExponent,
// nesting past facts.MaxArgsDepth, bytes that are not JSON); nil when
// they read. Such a call is invalid_args and never executes; a verifier
// of its receipt or approval refuses it, since two readers of its bytes
// could run different arguments.
func CheckCallArgs(raw []byte) error {
	if p := facts.ReadArgs(raw).Problem; p != nil {
		return errors.New(p.String())
	}
	return nil
}

// CallDigest is the digest of a tool call that binds an approval and a
// receipt to it: "sha256:" and the lowercase hex SHA-256 of the
// canonical JSON (Canonical) of {"args": A, "tool": T, "tool_call_id":
// ID}, where A is the call's arguments as the policies read them
// (facts.ArgsValue; null when absent) and ID is null when the call has
// none. Numbers are written exactly as the history spells them (250 and
// 250.0 are different arguments). Arguments that cannot be read exactly
// one way (CheckCallArgs) digest as null: such a call is invalid_args,
// never bound nor executed, and receipt verification refuses it.
// Harnesses never compute it: they pass back the digest the decision
// handed out.
func CallDigest(toolCallID *string, tool string, args []byte) string {
	var id any
	if toolCallID != nil {
		id = *toolCallID
	}
	b, err := Canonical(map[string]any{"args": facts.ArgsValue(args), "tool": tool, "tool_call_id": id})
	if err != nil {
		// Only a value facts.ArgsValue cannot produce fails to encode.
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Canonical is the canonical JSON of v, a value read from JSON with
// numbers as json.Number (as facts.ArgsValue and a json.Decoder with
// UseNumber give): object keys sorted by their bytes, no whitespace,
// strings escaped as Go's encoding/json does without HTML escaping, and
// numbers written as they were spelled.
func Canonical(v any) ([]byte, error) { return canonical(v, false) }

// ContextDigest is the lowercase hex SHA-256 of a request context's
// canonical JSON, v read as for Canonical: the context's part of a
// decision's fingerprint. It escapes <, > and & as encoding/json does by
// default, as the fingerprint always has, so that fingerprints stay what
// they were.
func ContextDigest(v any) (string, error) {
	b, err := canonical(v, true)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// canonical writes v as Canonical does, escaping HTML's characters or
// not. Maps' keys are written sorted; json.Number keeps its text.
func canonical(v any, escapeHTML bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// sameJSON compares two JSON documents as values (members in any order;
// numbers as spelled); two empty ones are the same, an empty one and
// another are not.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ca, errA := canonicalOf(a)
	cb, errB := canonicalOf(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

// canonicalOf is the canonical JSON of the first JSON value of raw.
func canonicalOf(raw json.RawMessage) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return Canonical(v)
}
