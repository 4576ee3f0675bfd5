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
