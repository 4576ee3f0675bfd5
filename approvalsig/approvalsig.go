// Package approvalsig makes an approval count only when the approver
// signed it: with an approver key set (--approver-keys, a JWKS), an
// approval must carry "signature", a compact JWS by a key of the set over
// the approval's digest, kind and override_args (Payload). The
// approver's identity is then the key's — its "sub" member where the
// JWKS gives one, its kid otherwise — not the names the client wrote. An
// approval that is unsigned, signed by a key not in the set, signed over
// another digest, kind or arguments, or expired does not count: Check
// marks it Refused, and the decision records it as not applied, saying
// why. Check also records each outcome as a code (Verified, Unsigned,
// UnknownKey, …) with the kid, which Outcomes gives as the sidecar's
// decision log records them.
package approvalsig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/policycheck/policycheck/facts"
)

// Payload is what an approver signs.
type Payload struct {
	Digest string `json:"digest"`
	Kind   string `json:"kind"`
	// OverrideArgs are the arguments the approval makes the call run
	// with; absent when the approval has none.
	OverrideArgs json.RawMessage `json:"override_args,omitempty"`
	// Expiry, Unix seconds, bounds the signature's use; 0 for none.
	Expiry int64 `json:"exp,omitempty"`
}

// Verifier checks approvals' signatures against a key set.
type Verifier struct {
	keys jwk.Set
	now  func() time.Time
}

// Option configures a Verifier.
type Option func(*Verifier)

// Clock sets the verifier's clock (time.Now otherwise).
func Clock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

// New returns a Verifier of keys: public keys, each with a kid and an alg.
func New(keys jwk.Set, opts ...Option) (*Verifier, error) {
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
	v := &Verifier{keys: keys, now: time.Now}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

func isPrivate(k jwk.Key) bool {
	for _, name := range []string{"d", "p", "q", "k"} {
		if k.Has(name) {
			return true
		}
	}
	return false
}

// ReadKeys reads a JWKS file of approver keys.
func ReadKeys(path string) (jwk.Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("approver keys: %w", err)
	}
	set, err := jwk.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("approver keys %s: %w", path, err)
	}
	return set, nil
}

// Sign signs p with key (a private JWK with kid and alg), as an approver's
// tool would.
func Sign(key jwk.Key, p Payload) (string, error) {
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

// Outcomes of a signature check (facts.Approval.Verification,
// Outcome.Result): Verified, or the code of why the approval does not
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
	Expired      = "expired"       // the signature's exp has passed
)

// refusal is why an approval does not count: its code and its sentence.
type refusal struct{ code, msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(code, format string, a ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, a...)}
}

// Check returns approvals with every approval's signature checked: one
// that counts has the signing key's identity as its approvers and
// Verification Verified; one that does not has Refused saying why and
// Verification the code of why. KeyID is the kid the signature names.
func (v *Verifier) Check(approvals facts.Approvals) facts.Approvals {
	if approvals == nil {
		return nil
	}
	out := make(facts.Approvals, len(approvals))
	for id, a := range approvals {
		who, kid, r := v.check(a)
		a.KeyID = kid
		if r != nil {
			a.Refused, a.Verification = r.msg, r.code
		} else {
			a.Approvers, a.Verification = []string{who}, Verified
		}
		out[id] = a
	}
	return out
}

func (v *Verifier) check(a facts.Approval) (who, kid string, _ *refusal) {
	if a.Signature == "" {
		return "", "", refuse(Unsigned, "unsigned: approvals must carry a signature by an approver key (--approver-keys)")
	}
	msg, err := jws.Parse([]byte(strings.TrimSpace(a.Signature)), jws.WithCompact())
	if err != nil || len(msg.Signatures()) != 1 {
		return "", "", refuse(Malformed, "the signature is not a compact JWS")
	}
	kid, _ = msg.Signatures()[0].ProtectedHeaders().KeyID()
	key, ok := v.keys.LookupKeyID(kid)
	if kid == "" || !ok {
		return "", kid, refuse(UnknownKey, "signed by key %q, which is not an approver key", kid)
	}
	raw, err := jws.Verify([]byte(strings.TrimSpace(a.Signature)), jws.WithKeySet(v.keys, jws.WithRequireKid(true)))
	if err != nil {
		return "", kid, refuse(BadSignature, "the signature does not verify with approver key %q", kid)
	}
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return "", kid, refuse(Malformed, "the signed payload is not an approval: %v", err)
	}
	switch {
	case p.Digest != a.Digest:
		return "", kid, refuse(OtherCall, "signed for the call with digest %s, the approval carries %s", p.Digest, a.Digest)
	case p.Kind != a.Kind:
		return "", kid, refuse(OtherKind, "signed as %s, the approval says %s", p.Kind, a.Kind)
	case !sameArgs(p.OverrideArgs, a.OverrideArgs):
		return "", kid, refuse(OtherArgs, "signed over other override_args than the approval carries")
	case p.Expiry != 0 && v.now().Unix() >= p.Expiry:
		return "", kid, refuse(Expired, "the signature expired at %s", time.Unix(p.Expiry, 0).UTC().Format(time.RFC3339))
	}
	var sub string
	if key.Get("sub", &sub) == nil && sub != "" {
		return sub, kid, nil
	}
	return kid, kid, nil
}

// Outcome is what a signature check made of one approval, as the
// sidecar's decision log records it (an event's custom.approvals) and
// `policycheck replay` reads it back: the approval's call and kind, the
// Result (Verified or the code of a refusal) with its Reason, the kid the
// signature names, the approver it verified as, and the signature itself,
// so that a replay with the approver keys can judge it again.
type Outcome struct {
	ToolCallID string `json:"tool_call_id"`
	Digest     string `json:"digest"`
	Kind       string `json:"kind"`
	Result     string `json:"result"`
	Reason     string `json:"reason,omitempty"`
	KeyID      string `json:"kid,omitempty"`
	Approver   string `json:"approver,omitempty"`
	Signature  string `json:"signature,omitempty"`
}

// Outcomes returns the outcome of every approval of approvals that a
// signature check judged (Check), sorted by tool_call_id; nil when no
// check ran (no approver keys), so that a log without approver keys
// records nothing of them.
func Outcomes(approvals facts.Approvals) []Outcome {
	var out []Outcome
	for id, a := range approvals {
		if a.Verification == "" {
			continue
		}
		o := Outcome{ToolCallID: id, Digest: a.Digest, Kind: a.Kind, Result: a.Verification, Reason: a.Refused,
			KeyID: a.KeyID, Signature: a.Signature}
		if a.Verification == Verified && len(a.Approvers) == 1 {
			o.Approver = a.Approvers[0]
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Outcome) int { return strings.Compare(a.ToolCallID, b.ToolCallID) })
	return out
}

// sameArgs compares two argument objects as JSON values (members in any
// order; numbers as spelled).
func sameArgs(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ca, errA := canonical(a)
	cb, errB := canonical(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

func canonical(raw json.RawMessage) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
