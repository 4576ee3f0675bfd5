package trust

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Invalid is Verify's error for a receipt that does not vouch for the
// call: Reason says why.
type Invalid struct{ Reason string }

func (e *Invalid) Error() string { return "receipt rejected: " + e.Reason }

func invalid(format string, a ...any) error { return &Invalid{Reason: fmt.Sprintf(format, a...)} }

// Verify checks that receipt is a receipt signed by a key of keys, not
// expired, for exactly call: the same run, tool_call_id and tool, and
// arguments whose digest is the one signed. It returns the receipt's
// claims, or an *Invalid that says why not.
func Verify(receipt string, keys jwk.Set, call Call, opts ...Option) (*Claims, error) {
	cfg := newConfig(opts)
	j := checkJWS(receipt, keys, ReceiptType)
	switch j.fault {
	case jwsMalformed:
		return nil, invalid("not a compact JWS: %v", j.err)
	case jwsSignatures:
		return nil, invalid("want one signature, the receipt has %d", j.n)
	case jwsNoKid:
		return nil, invalid("the receipt names no key (kid)")
	case jwsType:
		return nil, invalid("typ is %q, not %q", j.typ, ReceiptType)
	case jwsUnknownKey:
		return nil, invalid("signed by key %q, which is not in the key set", j.kid)
	case jwsBadSig:
		return nil, invalid("the signature does not verify with key %q: %v", j.kid, j.err)
	}
	payload := j.payload
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, invalid("the payload is not a receipt: %v", err)
	}
	now := cfg.now()
	if c.Expiry == 0 || now.Unix() >= c.Expiry {
		return nil, invalid("expired at %s (now %s)", time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if c.RunID != call.RunID {
		return nil, invalid("issued for run %s, the call is in run %s", quoteOrNone(c.RunID), quoteOrNone(call.RunID))
	}
	if !sameID(c.ToolCallID, call.ToolCallID) {
		return nil, invalid("issued for tool_call_id %s, the call's is %s", idText(c.ToolCallID), idText(call.ToolCallID))
	}
	if c.Tool != call.Tool {
		return nil, invalid("issued for tool %q, the call is to %q", c.Tool, call.Tool)
	}
	if err := CheckCallArgs(call.Args); err != nil {
		// A key twice or data after the JSON: the service could run
		// other arguments than the ones the decision judged.
		return nil, invalid("the call's arguments cannot be read exactly one way (%v)", err)
	}
	if d := CallDigest(call.ToolCallID, call.Tool, call.Args); d != c.Digest {
		return nil, invalid("issued for arguments with digest %s, the call's arguments have digest %s", c.Digest, d)
	}
	return &c, nil
}

func sameID(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func idText(id *string) string {
	if id == nil {
		return "null"
	}
	return strconv.Quote(*id)
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none: a stateless decision)"
	}
	return strconv.Quote(s)
}

// Peek reads a receipt's key id (the kid of its protected header) and its
// claims without verifying anything: for recording which receipt a
// decision handed out and which key signed it (the sidecar's decision
// log), never for trusting one (Verify is that). An error says why the
// text is not a receipt at all.
func Peek(receipt string) (kid string, claims *Claims, err error) {
	j, msg := parseCompact(receipt)
	switch j.fault {
	case jwsMalformed:
		return "", nil, invalid("not a compact JWS: %v", j.err)
	case jwsSignatures:
		return "", nil, invalid("want one signature, the receipt has %d", j.n)
	}
	var c Claims
	if err := json.Unmarshal(msg.Payload(), &c); err != nil {
		return j.kid, nil, invalid("the payload is not a receipt: %v", err)
	}
	return j.kid, &c, nil
}

// IDs returns a receipt's id (the jti claim) and the kid of the key
// that signed it, read without verifying anything, as cheaply as they can
// be read: what the sidecar's decision log records of every receipt.
func IDs(receipt string) (jti, kid string, err error) {
	head, rest, ok := strings.Cut(strings.TrimSpace(receipt), ".")
	payload, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", "", invalid("not a compact JWS")
	}
	var h struct {
		Kid string `json:"kid"`
	}
	var c struct {
		ID string `json:"jti"`
	}
	for _, part := range []struct {
		b64 string
		v   any
	}{{head, &h}, {payload, &c}} {
		raw, err := base64.RawURLEncoding.DecodeString(part.b64)
		if err != nil {
			return "", "", invalid("not a compact JWS: %v", err)
		}
		if err := json.Unmarshal(raw, part.v); err != nil {
			return "", "", invalid("not a receipt: %v", err)
		}
	}
	return c.ID, h.Kid, nil
}

// VerifyReceipt checks receipt for the call (run id, "" when stateless;
// tool_call_id; tool; the arguments as the history spells them) against
// the keys s serves (Keys: the current key and the replaced keys whose
// receipts may not have expired yet), as of s's clock: the check of a
// receipt a harness kept in a tool return's metadata.policycheck_receipt
// (the engine's verified evidence). It returns Verify's error.
func (s *Signer) VerifyReceipt(receipt, runID string, toolCallID *string, tool string, args []byte) error {
	_, err := Verify(receipt, s.Keys(), Call{RunID: runID, ToolCallID: toolCallID, Tool: tool, Args: args}, Clock(s.now))
	return err
}
