package trust

import (
	"strings"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// jwsFault is the step at which a JWS failed checkJWS.
type jwsFault int

const (
	jwsOK         jwsFault = iota
	jwsMalformed           // not a compact JWS (err says why)
	jwsSignatures          // not exactly one signature (n says how many)
	jwsNoKid               // the protected header names no key
	jwsType                // the typ is not the one wanted (typ)
	jwsUnknownKey          // the kid is not in the key set
	jwsBadSig              // the signature does not verify with the kid's key (err)
)

// jwsCheck is what checkJWS found: the fault (jwsOK when the JWS
// verifies), the kid, typ and key the protected header names, the
// signature count, the error a parse or verification gave, and the
// verified payload.
type jwsCheck struct {
	fault   jwsFault
	kid     string
	typ     string
	n       int
	key     jwk.Key
	err     error
	payload []byte
}

// parseCompact parses text (spaces around it ignored) as a compact JWS
// of one signature, without verifying it: the kid of its protected
// header and its payload.
func parseCompact(text string) (c jwsCheck, msg *jws.Message) {
	msg, err := jws.Parse([]byte(strings.TrimSpace(text)), jws.WithCompact())
	if err != nil {
		return jwsCheck{fault: jwsMalformed, err: err}, nil
	}
	sigs := msg.Signatures()
	if len(sigs) != 1 {
		return jwsCheck{fault: jwsSignatures, n: len(sigs)}, msg
	}
	hdr := sigs[0].ProtectedHeaders()
	c.kid, _ = hdr.KeyID()
	c.typ, _ = hdr.Type()
	c.n = 1
	return c, msg
}

// checkJWS is the one JWS check of receipts and signed approvals: text
// must be a compact JWS with one signature, whose protected header names
// a kid of keys (and has typ wantTyp, when wantTyp is not empty), and
// whose signature verifies with that key.
func checkJWS(text string, keys jwk.Set, wantTyp string) jwsCheck {
	c, _ := parseCompact(text)
	if c.fault != jwsOK {
		return c
	}
	if c.kid == "" {
		c.fault = jwsNoKid
		return c
	}
	if wantTyp != "" && c.typ != wantTyp {
		c.fault = jwsType
		return c
	}
	key, ok := keys.LookupKeyID(c.kid)
	if !ok {
		c.fault = jwsUnknownKey
		return c
	}
	c.key = key
	payload, err := jws.Verify([]byte(strings.TrimSpace(text)), jws.WithKeySet(keys, jws.WithRequireKid(true)))
	if err != nil {
		c.fault, c.err = jwsBadSig, err
		return c
	}
	c.payload = payload
	return c
}
