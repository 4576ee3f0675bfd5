package receiptcases

import (
	"encoding/json"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/policycheck/policycheck/approvalsig"
)

// Approver is the identity ApproverJWKS gives the approver key.
const Approver = "ana@example.com"

// approverKey is the private JWK of seed n with kid.
func approverKey(n byte, kid string) jwk.Key {
	k, err := jwk.Import(Key(n))
	if err != nil {
		panic(err)
	}
	_ = k.Set(jwk.KeyIDKey, kid)
	_ = k.Set(jwk.AlgorithmKey, jwa.EdDSA())
	return k
}

// ApproverJWKS is the --approver-keys file: the public key of seed 3,
// kid "ana-key", sub Approver.
func ApproverJWKS() []byte {
	pub, err := approverKey(3, "ana-key").PublicKey()
	if err != nil {
		panic(err)
	}
	_ = pub.Set("sub", Approver)
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	b, err := json.Marshal(set)
	if err != nil {
		panic(err)
	}
	return b
}

// ApprovalCase is one signature on the example approval.
type ApprovalCase struct {
	Name string
	// Sign returns the approval's signature given the honest payload
	// (the approval's digest, kind and override_args); "" leaves the
	// approval unsigned.
	Sign func(honest approvalsig.Payload) string
	// Applied: the approval counts; Want is a piece of its why.
	Applied bool
	Want    string
}

func sign(n byte, kid string, p approvalsig.Payload) string {
	s, err := approvalsig.Sign(approverKey(n, kid), p)
	if err != nil {
		panic(err)
	}
	return s
}

// ApprovalCases is the table of signed approvals.
func ApprovalCases() []ApprovalCase {
	return []ApprovalCase{
		{Name: "signed by the approver", Sign: func(p approvalsig.Payload) string { return sign(3, "ana-key", p) }, Applied: true, Want: "applied: approved by " + Approver},
		{Name: "unsigned", Sign: func(approvalsig.Payload) string { return "" }, Want: "not applied: unsigned"},
		{Name: "re-signed by an unknown key", Sign: func(p approvalsig.Payload) string { return sign(4, "mallory", p) }, Want: `signed by key "mallory", which is not an approver key`},
		{Name: "re-signed by another key under the approver's kid", Sign: func(p approvalsig.Payload) string { return sign(4, "ana-key", p) }, Want: `does not verify with approver key "ana-key"`},
		{Name: "signed over other arguments", Sign: func(p approvalsig.Payload) string {
			p.OverrideArgs = json.RawMessage(`{"from": "ops", "to": "mallory", "amount": 4000}`)
			return sign(3, "ana-key", p)
		}, Want: "signed over other override_args"},
		{Name: "signed over the model's arguments", Sign: func(p approvalsig.Payload) string {
			p.OverrideArgs = nil
			return sign(3, "ana-key", p)
		}, Want: "signed over other override_args"},
		{Name: "signed for another call", Sign: func(p approvalsig.Payload) string {
			p.Digest = "sha256:" + "00000000000000000000000000000000000000000000000000000000000000ff"
			return sign(3, "ana-key", p)
		}, Want: "signed for the call with digest"},
		{Name: "signed as a denial", Sign: func(p approvalsig.Payload) string {
			p.Kind = "tool-denied"
			return sign(3, "ana-key", p)
		}, Want: "signed as tool-denied"},
		{Name: "expired", Sign: func(p approvalsig.Payload) string {
			p.Expiry = 1
			return sign(3, "ana-key", p)
		}, Want: "the signature expired"},
	}
}
