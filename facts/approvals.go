package facts

// Approval kinds, as pydantic-ai's DeferredToolResults writes them.
const (
	ToolApproved = "tool-approved"
	ToolDenied   = "tool-denied"
)

// DefaultDenialMessage is what the reference tells the model for a denial
// without a message (`False` in DeferredToolResults.approvals).
const DefaultDenialMessage = "The tool call was denied."

// Approval is a person's answer to a call that needed approval: one entry
// of pydantic-ai's DeferredToolResults.approvals plus the digest of the
// call the approver was shown (trust.CallDigest) and who answered. It is keyed
// by tool_call_id in Approvals.
type Approval struct {
	// Kind is ToolApproved or ToolDenied.
	Kind string
	// Digest is the digest the decision handed out for the call
	// (trust.CallDigest): the approval counts only for a call with this
	// digest.
	Digest string
	// OverrideArgs, for an approval, are the arguments to execute instead
	// of the model's (the raw JSON of an object, as loader checked it);
	// nil when none.
	OverrideArgs []byte
	// Message, for a denial, is what the model is told; "" means
	// DefaultDenialMessage.
	Message string
	// Approvers identify who answered, as the harness says; may be empty.
	// Where approvals are signed (package trust), the signing key's
	// identity replaces them.
	Approvers []string
	// Signature is the approver's compact JWS over the approval (package
	// trust); "" when the approval carried none.
	Signature string
	// Refused, set by a signature check (package trust), says why
	// the approval does not count; "" when it counts.
	Refused string
	// Verification, set by a signature check (package trust), is
	// its outcome: "verified", or a code of why the approval does not
	// count ("unsigned", "unknown_key", "bad_signature", "expired", …);
	// "" when no check ran.
	Verification string
	// KeyID, set by a signature check, is the kid the signature names;
	// "" when there is none.
	KeyID string
	// Expiry, set by a signature check that verified, is the signature's
	// exp (Unix seconds): after it the signature counts nowhere, so a
	// record of its use need not outlive it.
	Expiry int64
}

// Approvals maps a tool_call_id to the answer for that call.
type Approvals map[string]Approval
