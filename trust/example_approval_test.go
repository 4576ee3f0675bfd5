package trust_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/trust"
)

// The approval service signs what the person approved, for the run the
// call belongs to and with an expiry; the engine's caller checks the
// approvals before deciding. The signed approval counts, as the key's
// sub; the same approval with other arguments does not, nor on another
// run.
func ExampleApprovalVerifier_Check() {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // the approval service's key
	key, _ := jwk.Import(priv)
	_ = key.Set(jwk.KeyIDKey, "ana-key")
	_ = key.Set(jwk.AlgorithmKey, jwa.EdDSA())
	pub, _ := key.PublicKey()
	_ = pub.Set("sub", "ana@example.com")
	keys := jwk.NewSet()
	_ = keys.AddKey(pub)

	approved := trust.ApprovalPayload{
		Digest:       "sha256:145379999bf1b39b971e7863c21deb1efb5312494ebad5aa8315702331296e9b",
		Kind:         facts.ToolApproved,
		OverrideArgs: json.RawMessage(`{"from": "ops", "to": "savings", "amount": 4000}`),
		RunID:        "run-42",
		Expiry:       time.Now().Add(5 * time.Minute).Unix(),
	}
	sig, _ := trust.SignApproval(key, approved)

	v, _ := trust.NewApprovalVerifier(keys)
	checked := v.Check(facts.Approvals{
		"t2": {Kind: approved.Kind, Digest: approved.Digest, OverrideArgs: approved.OverrideArgs, Signature: sig, Approvers: []string{"whoever"}},
		"t3": {Kind: approved.Kind, Digest: approved.Digest, OverrideArgs: json.RawMessage(`{"amount": 9000}`), Signature: sig},
	}, "run-42")
	fmt.Println(checked["t2"].Approvers, checked["t2"].Refused == "")
	fmt.Println(checked["t3"].Refused)
	elsewhere := v.Check(facts.Approvals{
		"t2": {Kind: approved.Kind, Digest: approved.Digest, OverrideArgs: approved.OverrideArgs, Signature: sig},
	}, "run-43")
	fmt.Println(elsewhere["t2"].Refused)
	// Output:
	// [ana@example.com] true
	// signed over other override_args than the approval carries
	// signed for run "run-42", and this decision is a step of run "run-43"
}
