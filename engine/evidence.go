package engine

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/policycheck/policycheck/facts"
)

// ReceiptVerifier checks an execution receipt (package trust; a
// *trust.Signer is one, checking against its own keys) for the call a
// return answers: the run id ("" for a stateless decision), the call's
// tool_call_id, tool and arguments as the history spells them. It returns
// nil when the receipt vouches for the call, else an error saying why
// not.
type ReceiptVerifier interface {
	VerifyReceipt(receipt, runID string, toolCallID *string, tool string, args []byte) error
}

// UnverifiedEvidence is one piece of evidence a decision with verified
// evidence did not count (the decision's "unverified_evidence"): the
// part at Message, Part of the history carried it, and Why says why it
// was not vouched for.
type UnverifiedEvidence struct {
	Message int    `json:"message"`
	Part    int    `json:"part"`
	Why     string `json:"why"`
}

// VerifiedEvidence makes a stateless decision (Decide, Explain) count a
// reveal (a search return's discovered tools) or a capability load only
// where the tool return that carries it holds, in its
// metadata.policycheck_receipt, an execution receipt v verifies for the
// call the return answers (stateless: a receipt without a run id). Every
// other piece of evidence — a return without a receipt or with one that
// does not verify, a return that answers no search or load call, a
// tool-availability delta, a provider-side search return — is removed
// before the facts are derived, as if the history never held it, and
// listed in Decision.UnverifiedEvidence. It applies when the request
// carries a History and no Facts (a Run vouches with RunVerifiedEvidence
// instead). With v nil no receipt verifies: nothing counts.
func VerifiedEvidence(v ReceiptVerifier) DecideOption {
	return func(c *decideConfig) { c.evidence = &evidenceVoucher{v: v} }
}

// EvidenceVoucher is the facts.Voucher of VerifiedEvidence, for callers
// that derive facts themselves (facts.Derive with facts.VouchedBy).
func EvidenceVoucher(v ReceiptVerifier) facts.Voucher { return &evidenceVoucher{v: v} }

// RunVerifiedEvidence makes a Run count a reveal or a load only where the
// call that produced it is one this run judged execute (a call of a
// dispatched response whose latest decision was execute), or where its
// return holds a receipt v verifies for that call in the run runID (a
// run started again at offset 0 with its whole history: the harness kept
// the receipts). v may be nil: only the run's own judgements count.
// Unvouched evidence is removed and listed as with VerifiedEvidence.
func RunVerifiedEvidence(v ReceiptVerifier, runID string) RunOption {
	return func(c *runConfig) { c.evidence = &evidenceVoucher{v: v, runID: runID} }
}

// evidenceVoucher is the facts.Voucher of verified evidence.
type evidenceVoucher struct {
	v     ReceiptVerifier
	runID string
	// judged are the positions of the calls a run judged execute; nil
	// for a stateless decision.
	judged map[facts.Position]struct{}
}

// Vouch implements facts.Voucher.
func (ev *evidenceVoucher) Vouch(c facts.Claim) string {
	if _, ok := ev.judged[c.CallAt]; ok {
		return ""
	}
	what := "search"
	if c.Load {
		what = "load"
	}
	id := c.Call.ToolCallID
	if len(c.Part.Receipt) == 0 {
		if ev.judged != nil {
			return fmt.Sprintf("this run never judged the %s call %s (message %d, part %d) execute, and its return carries no receipt (metadata.policycheck_receipt)",
				what, strconv.Quote(id), c.CallAt.Message, c.CallAt.Part)
		}
		return fmt.Sprintf("the return carries no receipt (metadata.policycheck_receipt) of the %s call %s", what, strconv.Quote(id))
	}
	var text string
	if err := json.Unmarshal(c.Part.Receipt, &text); err != nil {
		return "metadata.policycheck_receipt is not a string (a compact JWS)"
	}
	if ev.v == nil {
		return "no receipt key here verifies receipts"
	}
	if err := ev.v.VerifyReceipt(text, ev.runID, &id, c.Call.ToolName, c.Call.Args); err != nil {
		return err.Error()
	}
	return ""
}

// judge records the calls of the response at index last that d judged
// execute, replacing an earlier decision of the same response's.
func (ev *evidenceVoucher) judge(last int, d *Decision) {
	for p := range ev.judged {
		if p.Message == last {
			delete(ev.judged, p)
		}
	}
	for _, c := range d.Calls {
		if c.Verdict == Execute {
			ev.judged[facts.Position{Message: last, Part: c.Part}] = struct{}{}
		}
	}
}

// unverified is the decision's list of the facts' unvouched evidence.
func unverified(u []facts.Unvouched) []UnverifiedEvidence {
	if len(u) == 0 {
		return nil
	}
	out := make([]UnverifiedEvidence, len(u))
	for i, e := range u {
		out[i] = UnverifiedEvidence{Message: e.At.Message, Part: e.At.Part, Why: e.Why}
	}
	return out
}
