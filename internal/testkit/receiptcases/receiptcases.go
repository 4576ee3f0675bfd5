// Package receiptcases is the table of execution-receipt forgeries that
// trust's own tests (beside the verifier), the CLI's and the sidecar's
// each run: the honest receipt verifies,
// and a receipt moved to another call, tool, arguments or run, an
// expired one, a tampered one and one signed by a key not in the set
// are each rejected, with a reason that says which.
package receiptcases

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"time"

	"github.com/policycheck/policycheck/trust"
)

// TTL is the receipts' lifetime in the table.
const TTL = 5 * time.Minute

// Case is one receipt presented with one call.
type Case struct {
	Name string
	// Edit turns the honest call into the call presented; nil presents
	// the honest call.
	Edit func(*trust.Call)
	// OtherKey: the receipt is signed by a key that is not in the set.
	OtherKey bool
	// Later: the receipt is verified this long after it was issued.
	Later time.Duration
	// Tamper rewrites the receipt's text; nil leaves it.
	Tamper func(string) string
	// Want is a piece of the rejection's reason; "" when the receipt
	// verifies.
	Want string
}

// Cases returns the table.
func Cases() []Case {
	return []Case{
		{Name: "honest"},
		{Name: "honest, just before it expires", Later: TTL - time.Minute},
		{Name: "moved to another call", Edit: func(c *trust.Call) { id := "other-call"; c.ToolCallID = &id }, Want: "issued for tool_call_id"},
		{Name: "moved to a call without an id", Edit: func(c *trust.Call) { c.ToolCallID = nil }, Want: "issued for tool_call_id"},
		{Name: "moved to another tool", Edit: func(c *trust.Call) { c.Tool = "issue_refund" }, Want: "issued for tool"},
		{Name: "moved to other arguments", Edit: func(c *trust.Call) { c.Args = []byte(`{"order_id": 8}`) }, Want: "issued for arguments with digest"},
		{Name: "arguments spelt as another number", Edit: func(c *trust.Call) { c.Args = []byte(`{"order_id": 7.0}`) }, Want: "issued for arguments with digest"},
		// Issue 43, item 9: a last-wins reader sees the honest arguments,
		// a first-wins tool service runs order 8.
		{Name: "a key twice, the honest value last", Edit: func(c *trust.Call) { c.Args = []byte(`{"order_id": 8, "order_id": 7}`) }, Want: `/order_id: the key "order_id" appears more than once`},
		{Name: "string arguments with data after the honest ones", Edit: func(c *trust.Call) { c.Args = []byte(`"{\"order_id\": 7}xyz"`) }, Want: "followed by other data"},
		{Name: "moved to another run", Edit: func(c *trust.Call) { c.RunID += "other-run" }, Want: "issued for run"},
		{Name: "expired", Later: TTL, Want: "expired at"},
		{Name: "signed by an unknown key", OtherKey: true, Want: "not in the key set"},
		{Name: "payload rewritten", Tamper: rewritePayload, Want: "signature does not verify"},
		{Name: "not a JWS", Tamper: func(string) string { return "not-a-receipt" }, Want: "not a compact JWS"},
		{Name: "unsigned (alg none)", Tamper: algNone, Want: "the signature does not verify"},
	}
}

// rewritePayload swaps the receipt's payload for another call's,
// keeping the header and the signature.
func rewritePayload(r string) string {
	parts := strings.Split(r, ".")
	if len(parts) != 3 {
		return r
	}
	// eyJ… is the base64url of `{"`: the payload of a smaller claim set.
	parts[1] = "eyJ0b29sIjoiaXNzdWVfcmVmdW5kIn0"
	return strings.Join(parts, ".")
}

// algNone keeps the receipt's kid, typ and payload under the header
// alg "none", without a signature.
func algNone(r string) string {
	parts := strings.Split(r, ".")
	if len(parts) != 3 {
		return r
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return r
	}
	var h map[string]any
	if json.Unmarshal(raw, &h) != nil {
		return r
	}
	h["alg"] = "none"
	b, _ := json.Marshal(h)
	return base64.RawURLEncoding.EncodeToString(b) + "." + parts[1] + "."
}

// Key returns the Ed25519 key of seed n, the same for every run.
func Key(n byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = n
	}
	return ed25519.NewKeyFromSeed(seed)
}

// PEM is key as --receipt-key reads it (PKCS #8).
func PEM(key ed25519.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // an Ed25519 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
