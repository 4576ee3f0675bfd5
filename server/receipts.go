package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/trust"
)

// checkApprovals checks the request's approvals' signatures, for a
// decision of run ("" stateless), when the server has approver keys.
func (s *Server) checkApprovals(a facts.Approvals, run string) facts.Approvals {
	if s.cfg.ApproverKeys == nil {
		return a
	}
	return s.cfg.ApproverKeys.Check(a, run)
}

// claimApprovals holds the verified signatures of a decision's approvals
// (run "" for a stateless one): a signature the sidecar applied before,
// or that a decision in flight holds, is refused as used. Settle the
// claim with the answered decision (the signatures it applied are then
// used) and release it in any case.
func (s *Server) claimApprovals(a facts.Approvals, run string) (facts.Approvals, *approvalClaim) {
	return s.spent.claim(a, run)
}

// receipts is the decision option that signs the executing calls'
// receipts of a decision of run ("" stateless) when the server signs
// receipts: a signature that cannot be made fails the decision (see
// signError) rather than answer an execute the tool service would refuse.
func (s *Server) receipts(run string) engine.DecideOption {
	return engine.WithReceipts(s.cfg.Receipts, run)
}

// decideError is the answer to a decision of endpoint ep that returned
// an error: a receipt that could not be signed (500), else input the
// engine cannot represent (400, counted as an evaluation error).
func (s *Server) decideError(ep string, err error) *Error {
	if errors.Is(err, engine.ErrSign) {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
	s.metrics.evalError(ep)
	return contextError(err)
}

// recordSignatures adds to a decision-log event's custom what the
// sidecar signed and checked for the decision, so that `policycheck
// replay` can verify it again from the log:
//
//   - receipts: for every call that carries a receipt, the call's index,
//     the receipt's id (jti) and the kid of the key that signed it (the
//     receipt itself is in the event's result);
//   - receipt_keys: the JWKS GET /v1/keys served when the decision was
//     made (the current key and the replaced keys still listed), in an
//     event with receipts only;
//   - approvals: with approver keys, the outcome of each approval's
//     signature check (trust.SignatureOutcomes: verified, or why not, the
//     kid, the approver, the signature).
//
// Without a receipt key and approver keys it adds nothing: the event is
// what it was before either existed.
func (s *Server) recordSignatures(custom map[string]any, d *engine.Decision) error {
	if s.cfg.Receipts != nil {
		var receipts []any
		for i, c := range d.Calls {
			if c.Receipt == "" {
				continue
			}
			jti, kid, err := trust.IDs(c.Receipt)
			if err != nil {
				return fmt.Errorf("call %d's receipt: %w", i, err)
			}
			// Plain JSON values, as OPA's mask policy reads the event.
			receipts = append(receipts, map[string]any{"call": json.Number(strconv.Itoa(i)), "jti": jti, "kid": kid})
		}
		if receipts != nil {
			raw, err := s.cfg.Receipts.KeysJSON()
			if err != nil {
				return fmt.Errorf("receipt keys: %w", err)
			}
			var keys any // decoded afresh: a mask may rewrite the event
			if err := json.Unmarshal(raw, &keys); err != nil {
				return fmt.Errorf("receipt keys: %w", err)
			}
			custom["receipts"], custom["receipt_keys"] = receipts, keys
		}
	}
	if s.cfg.ApproverKeys == nil {
		return nil
	}
	outcomes := trust.SignatureOutcomes(d.ApprovalsGiven())
	if outcomes == nil {
		return nil
	}
	raw, err := json.Marshal(outcomes)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	custom["approvals"] = v
	return nil
}

// evidence is the decision option of the server's evidence mode for a
// stateless request (none by default).
func (s *Server) evidence() []engine.DecideOption {
	if !s.cfg.VerifiedEvidence {
		return nil
	}
	return []engine.DecideOption{engine.VerifiedEvidence(s.cfg.Receipts)}
}

// runEvidence is the run option of the server's evidence mode for the
// run id (none by default).
func (s *Server) runEvidence(id string) []engine.RunOption {
	if !s.cfg.VerifiedEvidence {
		return nil
	}
	return []engine.RunOption{engine.RunVerifiedEvidence(s.cfg.Receipts, id)}
}
