package receiptcases

import (
	"encoding/json"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/policycheck/policycheck/trust"
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
	// (the approval's digest, kind and override_args, the run of the
	// decision it is sent with, "" for a stateless one, and an exp within
	// the default bound: Honest); "" leaves the approval unsigned.
	Sign func(honest trust.ApprovalPayload) string
	// Applied: the approval counts; Want is a piece of its why.
	Applied bool
	Want    string
	// Result is the signature check's outcome, as decision logs record
	// it (trust.Verified or the code of the refusal).
	Result string
}

func sign(n byte, kid string, p trust.ApprovalPayload) string {
	s, err := trust.SignApproval(approverKey(n, kid), p)
	if err != nil {
		panic(err)
	}
	return s
}

// ApprovalCases is the table of signed approvals.
func ApprovalCases() []ApprovalCase {
	return []ApprovalCase{
		{Name: "signed by the approver", Sign: func(p trust.ApprovalPayload) string { return sign(3, "ana-key", p) }, Applied: true, Want: "applied: approved by " + Approver, Result: trust.Verified},
		{Name: "unsigned", Sign: func(trust.ApprovalPayload) string { return "" }, Want: "not applied: unsigned", Result: trust.Unsigned},
		{Name: "re-signed by an unknown key", Sign: func(p trust.ApprovalPayload) string { return sign(4, "mallory", p) }, Want: `signed by key "mallory", which is not an approver key`, Result: trust.UnknownKey},
		{Name: "re-signed by another key under the approver's kid", Sign: func(p trust.ApprovalPayload) string { return sign(4, "ana-key", p) }, Want: `does not verify with approver key "ana-key"`, Result: trust.BadSignature},
		{Name: "signed over other arguments", Sign: func(p trust.ApprovalPayload) string {
			p.OverrideArgs = json.RawMessage(`{"from": "ops", "to": "mallory", "amount": 4000}`)
			return sign(3, "ana-key", p)
		}, Want: "signed over other override_args", Result: trust.OtherArgs},
		{Name: "signed over the model's arguments", Sign: func(p trust.ApprovalPayload) string {
			p.OverrideArgs = nil
			return sign(3, "ana-key", p)
		}, Want: "signed over other override_args", Result: trust.OtherArgs},
		{Name: "signed for another call", Sign: func(p trust.ApprovalPayload) string {
			p.Digest = "sha256:" + "00000000000000000000000000000000000000000000000000000000000000ff"
			return sign(3, "ana-key", p)
		}, Want: "signed for the call with digest", Result: trust.OtherCall},
		{Name: "signed as a denial", Sign: func(p trust.ApprovalPayload) string {
			p.Kind = "tool-denied"
			return sign(3, "ana-key", p)
		}, Want: "signed as tool-denied", Result: trust.OtherKind},
		{Name: "expired", Sign: func(p trust.ApprovalPayload) string {
			p.Expiry = 1
			return sign(3, "ana-key", p)
		}, Want: "the signature expired", Result: trust.Expired},
		{Name: "signed for another run", Sign: func(p trust.ApprovalPayload) string {
			p.RunID = "another-run"
			return sign(3, "ana-key", p)
		}, Want: `signed for run "another-run"`, Result: trust.OtherRun},
		{Name: "signed with no exp", Sign: func(p trust.ApprovalPayload) string {
			p.Expiry = 0
			return sign(3, "ana-key", p)
		}, Want: "the signature has no exp", Result: trust.NoExpiry},
		{Name: "signed with an exp beyond the bound", Sign: func(p trust.ApprovalPayload) string {
			p.Expiry = time.Now().Add(trust.DefaultMaxTTL + time.Hour).Unix()
			return sign(3, "ana-key", p)
		}, Want: "--approval-max-ttl", Result: trust.ExpiryTooFar},
	}
}

// Honest completes p, the approval's digest, kind and override_args,
// with what an approval service signs for a decision of run ("" for a
// stateless one): the run and an exp five minutes ahead.
func Honest(p trust.ApprovalPayload, run string) trust.ApprovalPayload {
	p.RunID = run
	p.Expiry = time.Now().Add(5 * time.Minute).Unix()
	return p
}
