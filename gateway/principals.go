package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/wire"
	"github.com/policycheck/policycheck/loader"
)

// Principal is who a bearer token speaks for.
type Principal struct {
	// Name identifies the principal in sessions and decision logs.
	Name string
	// Context is the principal's input.context (a JSON object; nil
	// means {}).
	Context any
	// Operator: the token may read sessions' histories
	// (GET /v1/sessions/{id}/history).
	Operator bool
}

// Principals maps bearer tokens (by their SHA-256) to principals.
type Principals struct {
	byHash map[[sha256.Size]byte]Principal
}

// tokenFile is --token-file's format (docs/gateway.md).
type tokenFile struct {
	Tokens []struct {
		Token       string          `json:"token"`
		TokenSHA256 string          `json:"token_sha256"`
		Principal   string          `json:"principal"`
		Context     json.RawMessage `json:"context"`
		Operator    bool            `json:"operator"`
	} `json:"tokens"`
}

// minTokenLen is the shortest token a token file may give.
const minTokenLen = 16

// ReadTokenFile reads --token-file (JSON; docs/gateway.md). Each
// principal's context must satisfy the registry's context_schema, when it
// has one.
func ReadTokenFile(path string, reg *facts.Registry) (*Principals, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	return ParseTokenFile(path, data, reg)
}

// ParseTokenFile is ReadTokenFile on the file's bytes.
func ParseTokenFile(file string, data []byte, reg *facts.Registry) (*Principals, error) {
	end, serr := wire.Skip(file, data, 0, loader.DefaultMaxDepth)
	if serr != nil {
		return nil, serr
	}
	if len(bytes.TrimSpace(data[end:])) > 0 {
		return nil, fmt.Errorf("%s: data after the JSON object", file)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var tf tokenFile
	if err := dec.Decode(&tf); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	p := &Principals{byHash: map[[sha256.Size]byte]Principal{}}
	var errs []error
	for i, t := range tf.Tokens {
		ptr := fmt.Sprintf("%s: /tokens/%d", file, i)
		var h [sha256.Size]byte
		switch {
		case t.Token != "" && t.TokenSHA256 != "":
			errs = append(errs, fmt.Errorf("%s: give token or token_sha256, not both", ptr))
			continue
		case t.Token != "":
			if len(t.Token) < minTokenLen {
				errs = append(errs, fmt.Errorf("%s/token: a token must be at least %d bytes", ptr, minTokenLen))
				continue
			}
			h = sha256.Sum256([]byte(t.Token))
		case t.TokenSHA256 != "":
			b, err := hex.DecodeString(t.TokenSHA256)
			if err != nil || len(b) != sha256.Size {
				errs = append(errs, fmt.Errorf("%s/token_sha256: want 64 hex digits", ptr))
				continue
			}
			copy(h[:], b)
		default:
			errs = append(errs, fmt.Errorf("%s: token (or token_sha256) is required", ptr))
			continue
		}
		if t.Principal == "" {
			errs = append(errs, fmt.Errorf("%s/principal: required, not empty", ptr))
			continue
		}
		if _, dup := p.byHash[h]; dup {
			errs = append(errs, fmt.Errorf("%s: the same token twice", ptr))
			continue
		}
		var ctxDoc any
		if len(t.Context) > 0 && !bytes.Equal(bytes.TrimSpace(t.Context), []byte("null")) {
			d := json.NewDecoder(bytes.NewReader(t.Context))
			d.UseNumber()
			if err := d.Decode(&ctxDoc); err != nil {
				errs = append(errs, fmt.Errorf("%s/context: %w", ptr, err))
				continue
			}
			if _, ok := ctxDoc.(map[string]any); !ok {
				errs = append(errs, fmt.Errorf("%s/context: must be a JSON object", ptr))
				continue
			}
			if reg != nil {
				if probs, _ := reg.ValidateContext(t.Context); probs != nil {
					errs = append(errs, fmt.Errorf("%s/context%s: %s (the registry's context_schema)", ptr, probs[0].Pointer, probs[0].Reason))
					continue
				}
			}
		}
		p.byHash[h] = Principal{Name: t.Principal, Context: ctxDoc, Operator: t.Operator}
	}
	if len(p.byHash) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no tokens", file))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// lookup returns the token's principal.
func (p *Principals) lookup(token string) (Principal, bool) {
	pr, ok := p.byHash[sha256.Sum256([]byte(token))]
	return pr, ok
}

// NewPrincipals maps raw tokens to principals (embedders, tests).
func NewPrincipals(tokens map[string]Principal) *Principals {
	p := &Principals{byHash: map[[sha256.Size]byte]Principal{}}
	for t, pr := range tokens {
		p.byHash[sha256.Sum256([]byte(t))] = pr
	}
	return p
}
