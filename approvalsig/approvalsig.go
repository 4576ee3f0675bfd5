// Package approvalsig makes an approval count only when the approver
// signed it: with an approver key set (--approver-keys, a JWKS), an
// approval must carry "signature", a compact JWS by a key of the set over
// the approval's digest, kind and override_args (Payload). The
// approver's identity is then the key's — its "sub" member where the
// JWKS gives one, its kid otherwise — not the names the client wrote. An
// approval that is unsigned, signed by a key not in the set, signed over
// another digest, kind or arguments, or expired does not count: Check
// marks it Refused, and the decision records it as not applied, saying
// why.
package approvalsig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// Check returns approvals with every approval's signature checked: one
// that counts has the signing key's identity as its approvers; one that
// does not has Refused saying why.
func (v *Verifier) Check(approvals facts.Approvals) facts.Approvals {
	if approvals == nil {
		return nil
	}
	out := make(facts.Approvals, len(approvals))
	for id, a := range approvals {
		who, err := v.check(a)
		if err != nil {
			a.Refused = err.Error()
		} else {
			a.Approvers = []string{who}
		}
		out[id] = a
	}
	return out
}

func (v *Verifier) check(a facts.Approval) (string, error) {
	if a.Signature == "" {
		return "", errors.New("unsigned: approvals must carry a signature by an approver key (--approver-keys)")
	}
	msg, err := jws.Parse([]byte(strings.TrimSpace(a.Signature)), jws.WithCompact())
	if err != nil || len(msg.Signatures()) != 1 {
		return "", errors.New("the signature is not a compact JWS")
	}
	kid, _ := msg.Signatures()[0].ProtectedHeaders().KeyID()
	key, ok := v.keys.LookupKeyID(kid)
	if kid == "" || !ok {
		return "", fmt.Errorf("signed by key %q, which is not an approver key", kid)
	}
	raw, err := jws.Verify([]byte(strings.TrimSpace(a.Signature)), jws.WithKeySet(v.keys, jws.WithRequireKid(true)))
	if err != nil {
		return "", fmt.Errorf("the signature does not verify with approver key %q", kid)
	}
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return "", fmt.Errorf("the signed payload is not an approval: %v", err)
	}
	switch {
	case p.Digest != a.Digest:
		return "", fmt.Errorf("signed for the call with digest %s, the approval carries %s", p.Digest, a.Digest)
	case p.Kind != a.Kind:
		return "", fmt.Errorf("signed as %s, the approval says %s", p.Kind, a.Kind)
	case !sameArgs(p.OverrideArgs, a.OverrideArgs):
		return "", errors.New("signed over other override_args than the approval carries")
	case p.Expiry != 0 && v.now().Unix() >= p.Expiry:
		return "", fmt.Errorf("the signature expired at %s", time.Unix(p.Expiry, 0).UTC().Format(time.RFC3339))
	}
	var sub string
	if key.Get("sub", &sub) == nil && sub != "" {
		return sub, nil
	}
	return kid, nil
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
