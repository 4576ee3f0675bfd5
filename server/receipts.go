package server

import (
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

// VerifiedEvidence counts a reveal (a search return's discovered tools)
// or a capability load only where the server can vouch for the call that
// produced it: on /v1/decide and /v1/explain, a return whose
// metadata.policycheck_receipt holds a receipt the Receipts signer
// verifies for that call (engine.VerifiedEvidence); on a run's decide
// endpoint, a call this run judged execute, or a receipt for it in this
// run (engine.RunVerifiedEvidence). Other evidence is ignored and listed
// in the decision's unverified_evidence. New refuses it without Receipts.
func VerifiedEvidence() Option { return func(c *config) { c.verified = true } }

// evidence is the decision option of the server's evidence mode for a
// stateless request (none by default).
func (s *Server) evidence() []engine.DecideOption {
	if !s.cfg.verified {
		return nil
	}
	return []engine.DecideOption{engine.VerifiedEvidence(s.cfg.receipts)}
}

// runEvidence is the run option of the server's evidence mode for the
// run id (none by default).
func (s *Server) runEvidence(id string) []engine.RunOption {
	if !s.cfg.verified {
		return nil
	}
	return []engine.RunOption{engine.RunVerifiedEvidence(s.cfg.receipts, id)}
}
