// Package trust is everything policycheck signs and verifies, in one
// leaf package that imports no OPA package and none of the engine's: a
// tool service that verifies a receipt imports this package alone.
//
// It holds:
//
//   - the call digest (CallDigest) and the canonical JSON it is taken
//     over (Canonical), the one definition the engine, receipts, signed
//     approvals and the context digest (ContextDigest) use;
//   - key reading: an Ed25519 signing key in PEM (ReadSigningKey), a
//     JWKS from bytes (ParseKeys) or a file (ReadKeys);
//   - one JWS check, which receipts and signed approvals both go through;
//   - execution receipts: a compact JWS (EdDSA, Ed25519) that policycheck
//     attaches to every call it judged execute when it runs with a
//     signing key (--receipt-key), and that the service which runs the
//     tool verifies before it acts (Signer, Claims, Verify);
//   - signed approvals: with an approver key set (--approver-keys), an
//     approval counts only when an approver key signed it
//     (ApprovalVerifier, SignApproval, SignatureOutcomes);
//   - one set of options (Clock, TTL, MaxTTL) for all of them.
//
// A receipt's payload (Claims) names the run (where the decision was a
// step of a run), the call's tool_call_id and tool, the digest of the
// arguments that will run (CallDigest over the tool_call_id, the tool
// and those arguments: the approver's override_args where an applied
// approval replaced them), the policy and registry revisions that
// decided, the approvals applied, and when it was issued and expires.
// Verify checks the signature against a JWKS (Signer.Keys serves one) and
// that every claim matches the call the service is about to run; a
// receipt moved to another run, call, tool or arguments, an expired one
// and one signed by a key not in the set all fail.
//
// A Signer holds the current key and the keys it replaced: after Rotate,
// a replaced key stays in the JWKS until the last receipt it signed has
// expired, so verifiers that fetch the JWKS keep accepting them.
//
// A signed approval carries "signature", a compact JWS by a key of the
// approver set over the approval's digest, kind and override_args, the
// run it is for and an expiry (ApprovalPayload). The approver's identity
// is then the key's — its "sub" member where the JWKS gives one, its kid
// otherwise — not the names the client wrote. An approval that is
// unsigned, signed by a key not in the set, signed over another digest,
// kind or arguments, signed for another run (or for a run where the
// request is stateless, or the reverse), with no exp, with an exp further
// ahead than the verifier's bound (MaxTTL) or expired does not count:
// ApprovalVerifier.Check marks it Refused, and the decision records it as
// not applied, saying why. That a signature is used once is the caller's
// to keep (the sidecar remembers the signatures it applied, by UseKey;
// see docs/trust.md). Check also records each outcome as a code
// (Verified, Unsigned, UnknownKey, …) with the kid, which
// SignatureOutcomes gives as the sidecar's decision log records them.
package trust
