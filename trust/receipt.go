package trust

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// DefaultTTL is how long a receipt is valid when no TTL is set: long
// enough for the harness to hand the call to the tool service, short
// enough that a leaked receipt is soon worthless.
const DefaultTTL = 5 * time.Minute

// ReceiptType is the JWS "typ" header of a receipt.
const ReceiptType = "policycheck-receipt+jws"

// Claims is the payload of a receipt.
type Claims struct {
	// ID (jti) is the receipt's own identifier, random and unique per
	// receipt: decision logs record it, and a tool service that runs a
	// call at most once can keep it. Receipts signed before receipts
	// carried one have none.
	ID string `json:"jti,omitempty"`
	// RunID is the run the decision was a step of (POST
	// /v1/runs/{id}/decide); empty for a stateless decision.
	RunID      string  `json:"run_id,omitempty"`
	ToolCallID *string `json:"tool_call_id"`
	Tool       string  `json:"tool"`
	// Digest is CallDigest over the tool_call_id, the tool and the
	// arguments that will run.
	Digest           string `json:"digest"`
	PolicyRevision   string `json:"policy_revision"`
	RegistryRevision string `json:"registry_revision,omitempty"`
	// Approvals are the approvals applied to the call (at most one).
	Approvals []ApprovalOutcome `json:"approvals,omitempty"`
	// IssuedAt and Expiry are Unix seconds.
	IssuedAt int64 `json:"iat"`
	Expiry   int64 `json:"exp"`
}

// Call is the call a tool service is about to run, as Verify checks a
// receipt against it.
type Call struct {
	// RunID is the run the call belongs to; empty when the decision was
	// stateless (POST /v1/decide, eval).
	RunID      string  `json:"run_id,omitempty"`
	ToolCallID *string `json:"tool_call_id"`
	Tool       string  `json:"tool"`
	// Args are the arguments the service will run the tool with, as JSON
	// (an object, or a string holding one, as the history spells them).
	Args json.RawMessage `json:"args"`
}

// ParseCall reads a Call from JSON, refusing unknown members and a call
// without a tool.
func ParseCall(data []byte) (Call, error) {
	var c Call
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Call{}, fmt.Errorf("call: %w (want an object of run_id, tool_call_id, tool and args)", err)
	}
	if dec.More() {
		return Call{}, errors.New("call: more than one JSON value")
	}
	if c.Tool == "" {
		return Call{}, errors.New("call: /tool is required")
	}
	return c, nil
}

// Signer signs receipts with its current key and serves the public keys
// that verify receipts not yet expired. It is safe for concurrent use.
type Signer struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	key     jwk.Key            // current private key, kid set
	raw     ed25519.PrivateKey // the same key, as jws signs with it fastest
	pub     jwk.Key
	retired []retiredKey
	// keysJSON is KeysJSON's last answer, for the key set of kids
	// keysKids (the current kid, then the retired ones still listed).
	keysJSON []byte
	keysKids string
}

type retiredKey struct {
	pub   jwk.Key
	until time.Time // the last receipt it signed expires then
}

// NewSigner returns a Signer of key; TTL and Clock apply.
func NewSigner(key ed25519.PrivateKey, opts ...Option) (*Signer, error) {
	cfg := newConfig(opts)
	s := &Signer{ttl: cfg.ttl, now: cfg.now}
	if s.ttl <= 0 {
		return nil, fmt.Errorf("receipt TTL must be positive, not %s", s.ttl)
	}
	k, pub, err := importKey(key)
	if err != nil {
		return nil, err
	}
	s.key, s.raw, s.pub = k, key, pub
	return s, nil
}

// importKey makes the JWK pair of key, kid its RFC 7638 thumbprint.
func importKey(key ed25519.PrivateKey) (jwk.Key, jwk.Key, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, nil, errors.New("receipt key: not an Ed25519 private key")
	}
	k, err := jwk.Import(key)
	if err != nil {
		return nil, nil, fmt.Errorf("receipt key: %w", err)
	}
	if err := jwk.AssignKeyID(k, jwk.WithThumbprintHash(crypto.SHA256)); err != nil {
		return nil, nil, fmt.Errorf("receipt key: %w", err)
	}
	pub, err := k.PublicKey()
	if err != nil {
		return nil, nil, fmt.Errorf("receipt key: %w", err)
	}
	if err := pub.Set(jwk.AlgorithmKey, jwa.EdDSA()); err != nil {
		return nil, nil, err
	}
	if err := pub.Set(jwk.KeyUsageKey, jwk.ForSignature); err != nil {
		return nil, nil, err
	}
	return k, pub, nil
}

// KeyID is the kid of the current key.
func (s *Signer) KeyID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	kid, _ := s.key.KeyID()
	return kid
}

// Rotate makes key the signing key. The key it replaces stays in Keys
// until every receipt it signed has expired (one TTL from now); rotating
// to the current key changes nothing.
func (s *Signer) Rotate(key ed25519.PrivateKey) error {
	k, pub, err := importKey(key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	newKid, _ := k.KeyID()
	if kid, _ := s.key.KeyID(); kid == newKid {
		return nil
	}
	s.retired = append(s.retired, retiredKey{pub: s.pub, until: s.now().Add(s.ttl)})
	s.key, s.raw, s.pub = k, key, pub
	return nil
}

// Keys returns the public keys that verify the receipts not yet
// expired: the current key first, then each replaced key until its last
// receipt expires.
func (s *Signer) Keys() jwk.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	set := jwk.NewSet()
	_ = set.AddKey(s.pub)
	kept := s.retired[:0]
	for _, r := range s.retired {
		if now.Before(r.until) {
			kept = append(kept, r)
			_ = set.AddKey(r.pub)
		}
	}
	s.retired = kept
	return set
}

// KeysJSON returns Keys as JSON (a JWKS), encoded once for each set of
// keys listed: what the decision log records with every event that
// carries receipts. The caller must not modify it.
func (s *Signer) KeysJSON() ([]byte, error) {
	s.mu.Lock()
	now := s.now()
	kid, _ := s.key.KeyID()
	kids := kid
	for _, r := range s.retired {
		if now.Before(r.until) {
			k, _ := r.pub.KeyID()
			kids += " " + k
		}
	}
	if s.keysJSON != nil && s.keysKids == kids {
		out := s.keysJSON
		s.mu.Unlock()
		return out, nil
	}
	s.mu.Unlock()
	out, err := json.Marshal(s.Keys())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.keysJSON, s.keysKids = out, kids
	s.mu.Unlock()
	return out, nil
}

// ServeHTTP serves Keys as a JWKS (RFC 7517, as application/json), for GET
// /v1/keys.
func (s *Signer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	b, err := json.Marshal(s.Keys())
	if err != nil {
		http.Error(w, "the key set does not encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// Sign signs c, setting its issued-at and expiry from the signer's clock
// and TTL, and its ID, when c has none, to a new random one.
func (s *Signer) Sign(c Claims) (string, error) {
	now := s.now()
	c.IssuedAt, c.Expiry = now.Unix(), now.Add(s.ttl).Unix()
	if c.ID == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("receipt: id: %w", err)
		}
		c.ID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("receipt: %w", err)
	}
	s.mu.Lock()
	key, raw := s.key, s.raw
	s.mu.Unlock()
	kid, _ := key.KeyID()
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.KeyIDKey, kid); err != nil {
		return "", err
	}
	if err := hdr.Set(jws.TypeKey, ReceiptType); err != nil {
		return "", err
	}
	out, err := jws.Sign(payload, jws.WithKey(jwa.EdDSA(), raw, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("receipt: signing: %w", err)
	}
	return string(out), nil
}
