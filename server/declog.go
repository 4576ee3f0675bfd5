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
	"github.com/policycheck/policycheck/internal/mask"
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
// their reasons, errors).
func (s *Server) logDecision(r *http.Request, endpoint, runID string, st *policyState, d *engine.Decision, ctxDoc any, messages int) {
	s.logEvent(r.Context(), r.RemoteAddr, endpoint, runID, st, d, ctxDoc, messages, nil)
}

// logEvent is logDecision for a decision whose request may be over (the
// shadow worker's): shadow, when set, goes in the event's custom.shadow.
func (s *Server) logEvent(ctx context.Context, remote, endpoint, runID string, st *policyState, d *engine.Decision, ctxDoc any, messages int, shadow map[string]any) {
	if s.mgr == nil {
		return
	}
	lp := logs.Lookup(s.mgr)
	if lp == nil {
		return
	}
	if !s.logSink.Room(lp) {
		s.logSink.TurnAway()
		return
	}
	input := map[string]any{}
	doc, err := d.InputDocument()
	if err != nil {
		s.metrics.logErrors.Inc()
		return
	}
	if m, ok := doc.(map[string]any); ok {
		input = m
	}
	input["endpoint"] = endpoint
	input["messages"] = json.Number(strconv.Itoa(messages))
	input["context"] = mask.Context(ctxDoc, s.cfg.maskContext)
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
		return
	}
	var in any = input
	info := &opaserver.Info{
		DecisionID: newDecisionID(),
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
	if err := lp.Log(ctx, info); err != nil {
		s.metrics.logErrors.Inc()
		s.cfg.logger.Warn("decision log", "error", err)
	}
}

func newDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
