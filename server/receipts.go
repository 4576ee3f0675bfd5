package server

import (
	"net/http"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/receipt"
)

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
