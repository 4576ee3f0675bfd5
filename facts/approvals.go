package facts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Approval kinds, as pydantic-ai's DeferredToolResults writes them.
const (
	ToolApproved = "tool-approved"
	ToolDenied   = "tool-denied"
)

// DefaultDenialMessage is what the reference tells the model for a denial
// without a message (`False` in DeferredToolResults.approvals).
const DefaultDenialMessage = "The tool call was denied."

// Approval is a person's answer to a call that needed approval: one entry
// of pydantic-ai's DeferredToolResults.approvals plus the digest of the
// call the approver was shown (CallDigest) and who answered. It is keyed
// by tool_call_id in Approvals.
type Approval struct {
	// Kind is ToolApproved or ToolDenied.
	Kind string
	// Digest is the digest the decision handed out for the call
	// (CallDigest): the approval counts only for a call with this digest.
	Digest string
	// OverrideArgs, for an approval, are the arguments to execute instead
	// of the model's (a JSON object); nil when none.
	OverrideArgs json.RawMessage
	// Message, for a denial, is what the model is told; "" means
	// DefaultDenialMessage.
	Message string
	// Approvers identify who answered, as the harness says; may be empty.
	Approvers []string
}

// Approvals maps a tool_call_id to the answer for that call.
type Approvals map[string]Approval

// NormalizeArgs returns a call's raw args as the policies see them (JSON
// values, numbers as json.Number): an object stays an object; a string
// that holds a JSON object is that object (the reference parses string
// args before validating them); anything else is passed as it is, and
// args that are absent or not JSON are nil.
func NormalizeArgs(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	if s, ok := v.(string); ok {
		var inner any
		d2 := json.NewDecoder(bytes.NewReader([]byte(s)))
		d2.UseNumber()
		if d2.Decode(&inner) == nil {
			if _, isObj := inner.(map[string]any); isObj {
				v = inner
			}
		}
	}
	return v
}

// CallDigest is the digest of a tool call that binds an approval to it:
// "sha256:" and the lowercase hex SHA-256 of the canonical JSON of
// {"args": A, "tool": T, "tool_call_id": ID}, where A is the call's
// arguments as NormalizeArgs reads them (null when absent) and ID is null
// when the call has none. Canonical JSON here: object keys sorted by
// their bytes, no whitespace, strings escaped as Go's encoding/json does
// without HTML escaping, and numbers written exactly as the history spells
// them (250 and 250.0 are different arguments). Harnesses never compute
// it: they pass back the digest the decision handed out.
func CallDigest(toolCallID *string, tool string, args []byte) string {
	var id any
	if toolCallID != nil {
		id = *toolCallID
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// A map's keys are written sorted; json.Number keeps its text.
	if err := enc.Encode(map[string]any{"args": NormalizeArgs(args), "tool": tool, "tool_call_id": id}); err != nil {
		// Only a value NormalizeArgs cannot produce fails to encode.
		return ""
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}
