package trust

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// ReadSigningKey reads a receipt signing key: an Ed25519 private key in
// PEM (PKCS #8, "PRIVATE KEY", as `openssl genpkey -algorithm ed25519`
// writes it).
func ReadSigningKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("receipt key %s: no PEM block", path)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("receipt key %s: more than one PEM block", path)
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("receipt key %s: a PEM %q block; want an Ed25519 \"PRIVATE KEY\" (PKCS #8)", path, block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("receipt key %s: %w", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("receipt key %s: a %T; want an Ed25519 private key", path, k)
	}
	return ek, nil
}

// ParseKeys reads a JWKS of receipt keys, as Signer.Keys and GET /v1/keys
// serve it; a set without a key is an error.
func ParseKeys(data []byte) (jwk.Set, error) {
	set, err := jwk.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if set.Len() == 0 {
		return nil, errors.New("keys: the set holds no key")
	}
	return set, nil
}

// ReadKeys reads a JWKS file of approver keys (NewApprovalVerifier
// checks them).
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
