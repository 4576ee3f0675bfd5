// Package receipt signs and verifies execution receipts: a compact JWS
// (EdDSA, Ed25519) that policycheck attaches to every call it judged
// execute when it runs with a signing key (--receipt-key), and that the
// service which runs the tool verifies before it acts.
//
// A receipt's payload (Claims) names the run (where the decision was a
// step of a run), the call's tool_call_id and tool, the digest of the
// arguments that will run (engine.CallDigest over the tool_call_id, the
// tool and those arguments: the approver's override_args where an
// applied approval replaced them), the policy and registry revisions
// that decided, the approvals applied, and when it was issued and
// expires. Verify checks the signature against a JWKS (Keys serves one)
// and that every claim matches the call the service is about to run; a
// receipt moved to another run, call, tool or arguments, an expired one
// and one signed by a key not in the set all fail.
//
// A Signer holds the current key and the keys it replaced: after Rotate,
// a replaced key stays in the JWKS until the last receipt it signed has
// expired, so verifiers that fetch the JWKS keep accepting them.
package receipt
