package server

import (
	"net/http"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// checkApprovals checks the request's approvals' signatures when the
// server has approver keys.
func (s *Server) checkApprovals(a facts.Approvals) facts.Approvals {
	if s.cfg.ApproverKeys == nil {
		return a
	}
	return s.cfg.ApproverKeys.Check(a)
}

// stamp signs d's executing calls when the server signs receipts; a
// signature that cannot be made fails the request (500) rather than
// answering an execute the tool service would refuse.
func (s *Server) stamp(d *engine.Decision, run string) *Error {
	if s.cfg.Receipts == nil {
		return nil
	}
	if err := s.cfg.Receipts.Stamp(d, run); err != nil {
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
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
