package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/policycheck/policycheck/facts"
)

// ApprovalPayload is what an approver signs.
type ApprovalPayload struct {
	Digest string `json:"digest"`
	Kind   string `json:"kind"`
	// OverrideArgs are the arguments the approval makes the call run
	// with; absent when the approval has none.
	OverrideArgs json.RawMessage `json:"override_args,omitempty"`
	// RunID is the run the approval is for (the id of
	// /v1/runs/{id}/decide); absent for a stateless decision (/v1/decide,
	// eval), and an approval signed for one does not count for the other.
	RunID string `json:"run_id,omitempty"`
	// Expiry, Unix seconds, bounds the signature's use. It is required,
	// and may lie at most the verifier's MaxTTL ahead of the check.
	Expiry int64 `json:"exp,omitempty"`
}

// ApprovalOutcome records one approval the request carried: who answered
// what, for which call, and whether it applied. An approval applies when
// it is bound to a call of the dispatched response (same tool_call_id,
// no other call of the response with that id, no outcome for the id in
// the history yet, and the call's digest, over its id, tool and
// arguments, is the one the approval carries) and decided the verdict: an
// approved call executes, a denied one is denied with the approver's
// message. Why says what happened, in particular why an approval did not
// apply ("not applied: duplicate tool_call_id …", "not applied: already
// used: …", …).
type ApprovalOutcome struct {
	ToolCallID string   `json:"tool_call_id"`
	Kind       string   `json:"kind"`
	Approvers  []string `json:"approvers"`
	Digest     string   `json:"digest"`
	// Override is true when the approval carried override_args.
	Override bool   `json:"override_args,omitempty"`
	Applied  bool   `json:"applied"`
	Why      string `json:"why"`
}

// DefaultMaxTTL is how far ahead of a check an approval signature's exp
// may lie unless MaxTTL says otherwise (--approval-max-ttl's default).
const DefaultMaxTTL = 15 * time.Minute

// ApprovalVerifier checks approvals' signatures against a key set.
type ApprovalVerifier struct {
	keys   jwk.Set
	now    func() time.Time
	maxTTL time.Duration
}

// NewApprovalVerifier returns an ApprovalVerifier of keys: public keys,
// each with a kid and an alg. Clock and MaxTTL apply.
func NewApprovalVerifier(keys jwk.Set, opts ...Option) (*ApprovalVerifier, error) {
	if keys.Len() == 0 {
		return nil, errors.New("approver keys: the set holds no key")
	}
	for i := range keys.Len() {
		k, _ := keys.Key(i)
		kid, _ := k.KeyID()
		if kid == "" {
			return nil, fmt.Errorf("approver keys: /keys/%d has no kid", i)
		}
		if _, ok := k.Algorithm(); !ok {
			return nil, fmt.Errorf("approver keys: /keys/%d (kid %q) has no alg", i, kid)
		}
		if _, err := jwk.PublicKeyOf(k); err != nil || isPrivate(k) {
			return nil, fmt.Errorf("approver keys: /keys/%d (kid %q) must be a public key", i, kid)
		}
	}
	cfg := newConfig(opts)
	return &ApprovalVerifier{keys: keys, now: cfg.now, maxTTL: cfg.maxTTL}, nil
}

func isPrivate(k jwk.Key) bool {
	for _, name := range []string{"d", "p", "q", "k"} {
		if k.Has(name) {
			return true
		}
	}
	return false
}

// SignApproval signs p with key (a private JWK with kid and alg), as an
// approver's tool would.
func SignApproval(key jwk.Key, p ApprovalPayload) (string, error) {
	alg, ok := key.Algorithm()
	if !ok {
		return "", errors.New("approval signature: the key has no alg")
	}
	sa, ok := alg.(jwa.SignatureAlgorithm)
	if !ok {
		sa, ok = jwa.LookupSignatureAlgorithm(alg.String())
		if !ok {
			return "", fmt.Errorf("approval signature: %s is not a signature algorithm", alg)
		}
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	out, err := jws.Sign(payload, jws.WithKey(sa, key))
	if err != nil {
		return "", fmt.Errorf("approval signature: %w", err)
	}
	return string(out), nil
}

// Outcomes of an approval signature check (facts.Approval.Verification,
// SignatureOutcome.Result): Verified, or the code of why the approval does not
// count.
const (
	Verified     = "verified"
	Unsigned     = "unsigned"      // the approval carries no signature
	Malformed    = "malformed"     // the signature is not a compact JWS, or its payload not an approval
	UnknownKey   = "unknown_key"   // signed by a key (kid) not in the set
	BadSignature = "bad_signature" // the signature does not verify with the key its kid names
	OtherCall    = "other_call"    // signed over another call's digest
	OtherKind    = "other_kind"    // signed as the other kind (an approval for a denial, or the reverse)
	OtherArgs    = "other_args"    // signed over other override_args
	OtherRun     = "other_run"     // signed for another run, or for a run where the decision is stateless, or the reverse
	NoExpiry     = "no_exp"        // the signed payload has no exp
	ExpiryTooFar = "exp_too_far"   // the signature's exp lies further ahead than the verifier's MaxTTL
	Expired      = "expired"       // the signature's exp has passed
	Used         = "used"          // the sidecar applied the signature before (or is applying it now)
)

// refusal is why an approval does not count: its code and its sentence.
type refusal struct{ code, msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(code, format string, a ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, a...)}
}

// Check returns approvals with every approval's signature checked for a
// decision of run (the run id of /v1/runs/{id}/decide; "" for a stateless
// decision): one that counts has the signing key's identity as its
// approvers and Verification Verified; one that does not has Refused
// saying why and Verification the code of why. KeyID is the kid the
// signature names.
func (v *ApprovalVerifier) Check(approvals facts.Approvals, run string) facts.Approvals {
	if approvals == nil {
		return nil
	}
	out := make(facts.Approvals, len(approvals))
	for id, a := range approvals {
		who, kid, exp, r := v.check(a, run)
		a.KeyID = kid
		if r != nil {
			a.Refused, a.Verification = r.msg, r.code
		} else {
			a.Approvers, a.Verification, a.Expiry = []string{who}, Verified, exp
		}
		out[id] = a
	}
	return out
}

func (v *ApprovalVerifier) check(a facts.Approval, run string) (who, kid string, exp int64, _ *refusal) {
	if a.Signature == "" {
		return "", "", 0, refuse(Unsigned, "unsigned: approvals must carry a signature by an approver key (--approver-keys)")
	}
	j := checkJWS(a.Signature, v.keys, "")
	kid = j.kid
	switch j.fault {
	case jwsMalformed, jwsSignatures:
		return "", "", 0, refuse(Malformed, "the signature is not a compact JWS")
	case jwsNoKid, jwsUnknownKey:
		return "", kid, 0, refuse(UnknownKey, "signed by key %q, which is not an approver key", kid)
	case jwsBadSig:
		return "", kid, 0, refuse(BadSignature, "the signature does not verify with approver key %q", kid)
	}
	key, raw := j.key, j.payload
	var p ApprovalPayload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return "", kid, 0, refuse(Malformed, "the signed payload is not an approval: %v", err)
	}
	switch {
	case p.Digest != a.Digest:
		return "", kid, 0, refuse(OtherCall, "signed for the call with digest %s, the approval carries %s", p.Digest, a.Digest)
	case p.Kind != a.Kind:
		return "", kid, 0, refuse(OtherKind, "signed as %s, the approval says %s", p.Kind, a.Kind)
	case !sameJSON(p.OverrideArgs, a.OverrideArgs):
		return "", kid, 0, refuse(OtherArgs, "signed over other override_args than the approval carries")
	case p.RunID != run && run == "":
		return "", kid, 0, refuse(OtherRun, "signed for run %q, and this decision is stateless: a run's approval counts on that run only", p.RunID)
	case p.RunID != run && p.RunID == "":
		return "", kid, 0, refuse(OtherRun, "signed for stateless decisions (no run_id), and this decision is a step of run %q: sign the run's id as run_id", run)
	case p.RunID != run:
		return "", kid, 0, refuse(OtherRun, "signed for run %q, and this decision is a step of run %q", p.RunID, run)
	case p.Expiry == 0:
		return "", kid, 0, refuse(NoExpiry, "the signature has no exp: an approval's signature must expire (within %s)", v.boundText())
	case v.now().Unix() >= p.Expiry:
		return "", kid, 0, refuse(Expired, "the signature expired at %s", time.Unix(p.Expiry, 0).UTC().Format(time.RFC3339))
	case v.maxTTL > 0 && p.Expiry > v.now().Add(v.maxTTL).Unix():
		return "", kid, 0, refuse(ExpiryTooFar, "the signature's exp %s lies more than %s ahead (--approval-max-ttl)",
			time.Unix(p.Expiry, 0).UTC().Format(time.RFC3339), v.maxTTL)
	}
	var sub string
	if key.Get("sub", &sub) == nil && sub != "" {
		return sub, kid, p.Expiry, nil
	}
	return kid, kid, p.Expiry, nil
}

func (v *ApprovalVerifier) boundText() string {
	if v.maxTTL <= 0 {
		return "any time"
	}
	return v.maxTTL.String() + ", --approval-max-ttl"
}

// UseKey identifies the approval a signature signs, however the compact
// JWS is spelled (a JWS parser accepts the same signature in more than one
// base64 form): the SHA-256 of the kid and of the signed payload. Two
// signatures of one key over the same payload (one run, call, kind,
// arguments and exp) are one approval. ok is false when signature is not
// a compact JWS with one signature; use it on signatures Check verified.
func UseKey(signature string) (key [sha256.Size]byte, ok bool) {
	j, msg := parseCompact(signature)
	if j.fault != jwsOK {
		return key, false
	}
	h := sha256.New()
	h.Write([]byte(j.kid))
	h.Write([]byte{0})
	h.Write(msg.Payload())
	copy(key[:], h.Sum(nil))
	return key, true
}

// SignatureOutcome is what a signature check made of one approval, as the
// sidecar's decision log records it (an event's custom.approvals) and
// `policycheck replay` reads it back: the approval's call and kind, the
// Result (Verified or the code of a refusal) with its Reason, the kid the
// signature names, the approver it verified as, and the signature itself,
// so that a replay with the approver keys can judge it again.
type SignatureOutcome struct {
	ToolCallID string `json:"tool_call_id"`
	Digest     string `json:"digest"`
	Kind       string `json:"kind"`
	Result     string `json:"result"`
	Reason     string `json:"reason,omitempty"`
	KeyID      string `json:"kid,omitempty"`
	Approver   string `json:"approver,omitempty"`
	Signature  string `json:"signature,omitempty"`
}

// SignatureOutcomes returns the outcome of every approval of approvals that a
// signature check judged (Check), sorted by tool_call_id; nil when no
// check ran (no approver keys), so that a log without approver keys
// records nothing of them.
func SignatureOutcomes(approvals facts.Approvals) []SignatureOutcome {
	var out []SignatureOutcome
	for id, a := range approvals {
		if a.Verification == "" {
			continue
		}
		o := SignatureOutcome{ToolCallID: id, Digest: a.Digest, Kind: a.Kind, Result: a.Verification, Reason: a.Refused,
			KeyID: a.KeyID, Signature: a.Signature}
		if a.Verification == Verified && len(a.Approvers) == 1 {
			o.Approver = a.Approvers[0]
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b SignatureOutcome) int { return strings.Compare(a.ToolCallID, b.ToolCallID) })
	return out
}
