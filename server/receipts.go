package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	"github.com/policycheck/policycheck/approvalsig"
	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/receipt"
)

// ApproverKeys makes an approval count only when it carries a signature
// by one of v's keys (package approvalsig), on /v1/decide, /v1/explain and
// the runs' decide endpoint; the approver is then the key's identity.
func ApproverKeys(v *approvalsig.Verifier) Option { return func(c *config) { c.approvers = v } }

// checkApprovals checks the request's approvals' signatures when the
// server has approver keys.
func (s *Server) checkApprovals(a facts.Approvals) facts.Approvals {
	if s.cfg.approvers == nil {
		return a
	}
	return s.cfg.approvers.Check(a)
}

// Receipts signs, with signer, an execution receipt for every call that
// /v1/decide and /v1/runs/{id}/decide judge execute, and serves the
// signer's public keys as a JWKS at GET /v1/keys. Without it no decision
// carries a receipt and /v1/keys is not found.
func Receipts(signer *receipt.Signer) Option { return func(c *config) { c.receipts = signer } }

// stamp signs d's executing calls when the server signs receipts; a
// signature that cannot be made fails the request (500) rather than
// answering an execute the tool service would refuse.
func (s *Server) stamp(d *engine.Decision, run string) *Error {
	if s.cfg.receipts == nil {
		return nil
	}
	if err := s.cfg.receipts.Stamp(d, run); err != nil {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
	return nil
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
//     signature check (approvalsig.Outcomes: verified, or why not, the
//     kid, the approver, the signature).
//
// Without a receipt key and approver keys it adds nothing: the event is
// what it was before either existed.
func (s *Server) recordSignatures(custom map[string]any, d *engine.Decision) error {
	var rec struct {
		Receipts  []loggedReceipt       `json:"receipts,omitempty"`
		Keys      json.RawMessage       `json:"receipt_keys,omitempty"`
		Approvals []approvalsig.Outcome `json:"approvals,omitempty"`
	}
	if s.cfg.receipts != nil {
		for i, c := range d.Calls {
			if c.Receipt == "" {
				continue
			}
			kid, cl, err := receipt.Peek(c.Receipt)
			if err != nil {
				return fmt.Errorf("call %d's receipt: %w", i, err)
			}
			rec.Receipts = append(rec.Receipts, loggedReceipt{Call: i, ID: cl.ID, KeyID: kid})
		}
		if rec.Receipts != nil {
			keys, err := json.Marshal(s.cfg.receipts.Keys())
			if err != nil {
				return fmt.Errorf("receipt keys: %w", err)
			}
			rec.Keys = keys
		}
	}
	if s.cfg.approvers != nil {
		rec.Approvals = approvalsig.Outcomes(d.ApprovalsGiven())
	}
	if rec.Receipts == nil && rec.Approvals == nil {
		return nil
	}
	// Plain JSON values, as OPA's mask policy reads the event.
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	maps.Copy(custom, m)
	return nil
}

// loggedReceipt names one receipt in a decision-log event.
type loggedReceipt struct {
	Call  int    `json:"call"`
	ID    string `json:"jti"`
	KeyID string `json:"kid"`
}
