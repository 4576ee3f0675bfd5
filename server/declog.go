package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	opaserver "github.com/open-policy-agent/opa/v1/server"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/server/internal/mask"
)

// decisionPath is the path decision logs name: the engine's entrypoint.
const decisionPath = "policycheck/availability/decision"

// logDecision sends a decision to OPA's decision-log plugin, when one is
// configured. The event's input is the whole Rego input document the
// decision query received (facts, outgoing, filters, dispatch with every
// call and its arguments, context), so that `policycheck replay` can
// decide it again, plus three keys of the sidecar's own: the endpoint,
// the run id and the number of messages decided on. The context is
// masked as before: the MaskContext pointers are removed, and OPA's mask
// policy, data.system.log.mask, applies on top to the whole event. Its
// result is the decision document (fingerprint, facts, verdicts with
// their reasons, errors). The event's decision id is id; it reports
// whether the event was handed to the plugin. With a receipt key or
// approver keys, the event's custom also records the receipts the
// decision handed out, the keys that verify them, and what the signature
// check made of each approval (recordSignatures).
func (s *Server) logDecision(r *http.Request, id, endpoint, runID string, st *policyState, d *engine.Decision, ctxDoc any, messages int) bool {
	return s.logEvent(r.Context(), r.RemoteAddr, id, endpoint, runID, st, d, ctxDoc, messages, nil)
}

// decisionLogs reports whether decisions are logged (OPA's decision-log
// plugin is configured).
func (s *Server) decisionLogs() bool {
	return s.mgr != nil && logs.Lookup(s.mgr) != nil
}

// decidedKey is the request context's key of the *decided in which
// observe leaves what names the decision, for the response's headers
// (see post).
type decidedKey struct{}

// decided names a decision in its response's headers: the policy
// revision that made it (Policycheck-Policy-Revision) and its decision
// log event's id (Policycheck-Decision-Id), when it is logged.
type decided struct{ rev, id string }

// noteDecided leaves d for the response's headers.
func noteDecided(r *http.Request, d decided) {
	if p, ok := r.Context().Value(decidedKey{}).(*decided); ok {
		*p = d
	}
}

// logEvent is logDecision for a decision whose request may be over (the
// shadow worker's): shadow, when set, goes in the event's custom.shadow.
func (s *Server) logEvent(ctx context.Context, remote, id, endpoint, runID string, st *policyState, d *engine.Decision, ctxDoc any, messages int, shadow map[string]any) bool {
	if !s.decisionLogs() {
		return false
	}
	lp := logs.Lookup(s.mgr)
	if !s.logSink.Room(lp) {
		s.logSink.TurnAway()
		return false
	}
	input := map[string]any{}
	doc, err := d.InputDocument()
	if err != nil {
		s.metrics.logErrors.Inc()
		return false
	}
	if m, ok := doc.(map[string]any); ok {
		input = m
	}
	input["endpoint"] = endpoint
	input["messages"] = json.Number(strconv.Itoa(messages))
	input["context"] = mask.Context(ctxDoc, s.cfg.MaskContext)
	if runID != "" {
		input["run"] = runID
	}
	var result any
	raw, err := json.Marshal(d)
	if err == nil {
		err = json.Unmarshal(raw, &result)
	}
	if err != nil {
		s.metrics.logErrors.Inc()
		return false
	}
	var in any = input
	info := &opaserver.Info{
		DecisionID: id,
		Path:       decisionPath,
		Timestamp:  time.Now().UTC(),
		Input:      &in,
		Results:    &result,
		RemoteAddr: remote,
		Revision:   st.rev,
		Bundles:    map[string]opaserver.BundleInfo{},
		Custom: map[string]any{
			"policy_revision":   d.PolicyRevision,
			"registry_revision": d.RegistryRevision,
			"fingerprint":       d.Fingerprint,
		},
	}
	for name, rev := range st.served {
		info.Bundles[name] = opaserver.BundleInfo{Revision: rev}
	}
	if shadow != nil {
		info.Custom["shadow"] = shadow
	}
	if err := s.recordSignatures(info.Custom, d); err != nil {
		s.metrics.logErrors.Inc()
		s.cfg.Logger.Warn("decision log", "error", err)
		return false
	}
	if err := lp.Log(ctx, info); err != nil {
		s.metrics.logErrors.Inc()
		s.cfg.Logger.Warn("decision log", "error", err)
		return false
	}
	return true
}

func newDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
