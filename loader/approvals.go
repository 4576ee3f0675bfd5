package loader

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
)

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ReadApprovalsFile reads an approvals file: a JSON object shaped like
// pydantic-ai's DeferredToolResults, whose "approvals" member maps each
// tool_call_id to an approval (see ParseApprovalsMap). Its "calls" and
// "metadata" members, which DeferredToolResults also writes, may be
// present as objects and are not read: results of external tools are not
// the policy's to judge. Any other member is refused.
func ReadApprovalsFile(file string, data []byte) (facts.Approvals, error) {
	doc, err := decodeObject(file, "", data, "the approvals file must be a JSON object with an \"approvals\" member (DeferredToolResults)")
	if err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(doc) {
		switch k {
		case "approvals":
		case "calls", "metadata":
			if !isJSONObject(doc[k]) {
				return nil, &Error{File: file, Pointer: "/" + PointerToken(k), Kind: KindSchema, Msg: k + " must be an object (it is not read)"}
			}
		default:
			return nil, &Error{File: file, Pointer: "/" + PointerToken(k), Kind: KindSchema,
				Msg: fmt.Sprintf("unknown member %q: an approvals file holds approvals (and DeferredToolResults' calls and metadata, not read)", k)}
		}
	}
	raw, ok := doc["approvals"]
	if !ok {
		return nil, &Error{File: file, Kind: KindSchema, Msg: "approvals is required: an object mapping each tool_call_id to its approval"}
	}
	return ParseApprovalsMap(file, "/approvals", raw)
}

// ParseApprovalsMap reads the approvals of DeferredToolResults.approvals
// as policycheck takes them, at JSON pointer ptr of file: an object
// mapping each tool_call_id to
//
//	{"kind": "tool-approved", "digest": "sha256:…", "override_args": {…}, "approvers": ["…"]}
//	{"kind": "tool-denied", "digest": "sha256:…", "message": "…", "approvers": ["…"]}
//
// where digest is the one the decision handed out for the call, and
// override_args, message and approvers are optional. The reference's bare
// true and false are refused: they carry no digest, so they cannot be
// bound to the call the approver saw. null is no approvals. A key that
// occurs twice in an object (two approvals for one tool_call_id) is
// refused, not read as the last one.
func ParseApprovalsMap(file, ptr string, raw []byte) (facts.Approvals, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	entries, err := decodeObject(file, ptr, raw, "approvals must be an object mapping each tool_call_id to its approval")
	if err != nil {
		return nil, err
	}
	out := make(facts.Approvals, len(entries))
	for _, id := range sortedKeys(entries) {
		at := ptr + "/" + PointerToken(id)
		if id == "" {
			return nil, &Error{File: file, Pointer: at, Kind: KindSchema, Msg: "a tool_call_id must not be empty"}
		}
		a, err := parseApproval(file, at, entries[id])
		if err != nil {
			return nil, err
		}
		out[id] = a
	}
	return out, nil
}

func parseApproval(file, at string, raw json.RawMessage) (facts.Approval, error) {
	var a facts.Approval
	bad := func(ptr, msg string) error { return &Error{File: file, Pointer: ptr, Kind: KindSchema, Msg: msg} }
	if t := string(bytes.TrimSpace(raw)); t == "true" || t == "false" {
		return a, bad(at, "a bare "+t+" carries no digest, so it cannot be bound to the call the approver saw: "+
			`write {"kind": "tool-approved" or "tool-denied", "digest": <the call's digest from the decision>}`)
	}
	m, err := decodeObject(file, at, raw, `an approval must be an object {"kind": …, "digest": …}`)
	if err != nil {
		return a, err
	}
	str := func(k string) (string, error) {
		var s string
		if json.Unmarshal(m[k], &s) != nil {
			return "", bad(at+"/"+k, k+" must be a string")
		}
		return s, nil
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "kind":
			if a.Kind, err = str(k); err != nil {
				return a, err
			}
			if a.Kind != facts.ToolApproved && a.Kind != facts.ToolDenied {
				return a, bad(at+"/kind", fmt.Sprintf("kind must be %q or %q, not %q", facts.ToolApproved, facts.ToolDenied, a.Kind))
			}
		case "digest":
			if a.Digest, err = str(k); err != nil {
				return a, err
			}
			if !digestPattern.MatchString(a.Digest) {
				return a, bad(at+"/digest", "digest must be \"sha256:\" and 64 lowercase hex digits, as the decision hands it out")
			}
		case "override_args":
			if !isJSONObject(m[k]) {
				return a, bad(at+"/override_args", "override_args must be an object of arguments")
			}
			a.OverrideArgs = append(json.RawMessage(nil), bytes.TrimSpace(m[k])...)
		case "message":
			if a.Message, err = str(k); err != nil {
				return a, err
			}
		case "signature":
			if a.Signature, err = str(k); err != nil {
				return a, err
			}
			if a.Signature == "" {
				return a, bad(at+"/signature", "signature must be a compact JWS, not empty")
			}
		case "approvers":
			var list []any
			if json.Unmarshal(m[k], &list) != nil || list == nil {
				return a, bad(at+"/approvers", "approvers must be an array of strings")
			}
			for i, x := range list {
				s, ok := x.(string)
				if !ok || strings.TrimSpace(s) == "" {
					return a, bad(fmt.Sprintf("%s/approvers/%d", at, i), "an approver must be a non-empty string")
				}
				a.Approvers = append(a.Approvers, s)
			}
		default:
			return a, bad(at+"/"+PointerToken(k), fmt.Sprintf("unknown member %q (an approval holds kind, digest, override_args, message, approvers, signature)", k))
		}
	}
	switch {
	case a.Kind == "":
		return a, bad(at, `kind is required: "tool-approved" or "tool-denied"`)
	case a.Digest == "":
		return a, bad(at, "digest is required: the digest the decision handed out for the call")
	case a.Kind == facts.ToolDenied && a.OverrideArgs != nil:
		return a, bad(at+"/override_args", "a denial has no override_args")
	case a.Kind == facts.ToolApproved && m["message"] != nil:
		return a, bad(at+"/message", "an approval has no message (a denial's message is what the model is told)")
	}
	return a, nil
}

// decodeObject decodes one JSON object into its members, refusing
// anything else (trailing data included) and a key that occurs twice.
func decodeObject(file, ptr string, data []byte, notObject string) (map[string]json.RawMessage, error) {
	// Checked by the history's reader first: encoding/json would read
	// invalid UTF-8 or a lone surrogate escape as U+FFFD, so that a call
	// id could read as another's.
	if _, err := wire.Skip(file, data, 0, DefaultMaxDepth); err != nil {
		err.Pointer = ptr + err.Pointer
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: "invalid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: "invalid JSON: unexpected data after the value"}
	}
	if !isJSONObject(v) {
		return nil, &Error{File: file, Pointer: ptr, Kind: KindSchema, Msg: notObject}
	}
	return objectMembers(file, ptr, v)
}

// objectMembers returns the members of obj, a valid JSON object, refusing
// a key that occurs twice: encoding/json would keep the last, so that one
// tool_call_id could hold two approvals and a reader of the document see
// another than the one that counts.
func objectMembers(file, ptr string, obj []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	m := map[string]json.RawMessage{}
	if _, err := dec.Token(); err != nil { // '{'
		return nil, &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: "invalid JSON: " + err.Error()}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: "invalid JSON: " + err.Error()}
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, &Error{File: file, Pointer: ptr, Kind: KindSyntax, Msg: "invalid JSON: " + err.Error()}
		}
		if _, dup := m[key]; dup {
			return nil, &Error{File: file, Pointer: ptr + "/" + PointerToken(key), Kind: KindSchema,
				Msg: fmt.Sprintf("duplicate key %q: each key of an object must be unique (the last one does not win)", key)}
		}
		m[key] = v
	}
	return m, nil
}

func isJSONObject(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
