package receipt

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/policycheck/policycheck/engine"
)

// Invalid is Verify's error for a receipt that does not vouch for the
// call: Reason says why.
type Invalid struct{ Reason string }

func (e *Invalid) Error() string { return "receipt rejected: " + e.Reason }

func invalid(format string, a ...any) error { return &Invalid{Reason: fmt.Sprintf(format, a...)} }

// VerifyOption configures Verify.
type VerifyOption func(*verifyConfig)

type verifyConfig struct{ now func() time.Time }

// At verifies as of the time now returns (time.Now otherwise): tests
// inject a clock.
func At(now func() time.Time) VerifyOption { return func(c *verifyConfig) { c.now = now } }

// ParseKeys reads a JWKS, as Signer.Keys and GET /v1/keys serve it.
func ParseKeys(data []byte) (jwk.Set, error) {
	set, err := jwk.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if set.Len() == 0 {
		return nil, fmt.Errorf("keys: the set holds no key")
	}
	return set, nil
}

// Verify checks that receipt is a receipt signed by a key of keys, not
// expired, for exactly call: the same run, tool_call_id and tool, and
// arguments whose digest is the one signed. It returns the receipt's
// claims, or an *Invalid that says why not.
func Verify(receipt string, keys jwk.Set, call Call, opts ...VerifyOption) (*Claims, error) {
	cfg := verifyConfig{now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	msg, err := jws.Parse([]byte(strings.TrimSpace(receipt)), jws.WithCompact())
	if err != nil {
		return nil, invalid("not a compact JWS: %v", err)
	}
	sigs := msg.Signatures()
	if len(sigs) != 1 {
		return nil, invalid("want one signature, the receipt has %d", len(sigs))
	}
	hdr := sigs[0].ProtectedHeaders()
	kid, _ := hdr.KeyID()
	if kid == "" {
		return nil, invalid("the receipt names no key (kid)")
	}
	if typ, _ := hdr.Type(); typ != Type {
		return nil, invalid("typ is %q, not %q", typ, Type)
	}
	if _, ok := keys.LookupKeyID(kid); !ok {
		return nil, invalid("signed by key %q, which is not in the key set", kid)
	}
	payload, err := jws.Verify([]byte(strings.TrimSpace(receipt)), jws.WithKeySet(keys, jws.WithRequireKid(true)))
	if err != nil {
		return nil, invalid("the signature does not verify with key %q: %v", kid, err)
	}
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
	if err := engine.CheckCallArgs(call.Args); err != nil {
		// A key twice or data after the JSON: the service could run
		// other arguments than the ones the decision judged.
		return nil, invalid("the call's arguments cannot be read exactly one way (%v)", err)
	}
	if d := engine.CallDigest(call.ToolCallID, call.Tool, call.Args); d != c.Digest {
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
	msg, err := jws.Parse([]byte(strings.TrimSpace(receipt)), jws.WithCompact())
	if err != nil {
		return "", nil, invalid("not a compact JWS: %v", err)
	}
	sigs := msg.Signatures()
	if len(sigs) != 1 {
		return "", nil, invalid("want one signature, the receipt has %d", len(sigs))
	}
	kid, _ = sigs[0].ProtectedHeaders().KeyID()
	var c Claims
	if err := json.Unmarshal(msg.Payload(), &c); err != nil {
		return kid, nil, invalid("the payload is not a receipt: %v", err)
	}
	return kid, &c, nil
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
// (engine.VerifiedEvidence). It returns Verify's error.
func (s *Signer) VerifyReceipt(receipt, runID string, toolCallID *string, tool string, args []byte) error {
	_, err := Verify(receipt, s.Keys(), Call{RunID: runID, ToolCallID: toolCallID, Tool: tool, Args: args}, At(s.now))
	return err
}
