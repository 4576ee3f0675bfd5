package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	opaserver "github.com/open-policy-agent/opa/v1/server"

	"github.com/policycheck/policycheck/engine"
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
	if !s.logSink.room(lp) {
		s.logSink.turnAway()
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
	input["context"] = maskContext(ctxDoc, s.cfg.maskContext)
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

// maskContext returns a copy of the context without the values at the
// given JSON pointers (relative to the context).
func maskContext(ctxDoc any, pointers []string) any {
	if ctxDoc == nil || slices.Contains(pointers, "") {
		return map[string]any{}
	}
	if raw, ok := ctxDoc.(json.RawMessage); ok {
		// A request's context arrives as its bytes: decoded here, for
		// the log only, into a value of the log's own.
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return map[string]any{}
		}
		for _, p := range pointers {
			removePointer(v, p)
		}
		return v
	}
	if len(pointers) == 0 {
		return ctxDoc
	}
	out := deepCopy(ctxDoc)
	for _, p := range pointers {
		removePointer(out, p)
	}
	return out
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// checkPointer refuses a mask that is not a JSON pointer (RFC 6901): a
// mask that matched nothing would log what it was meant to hide.
func checkPointer(ptr string) error {
	if ptr != "" && ptr[0] != '/' {
		return errors.New("a JSON pointer is empty (the whole context) or begins with '/'")
	}
	for i := 0; i < len(ptr); i++ {
		if ptr[i] == '~' && (i+1 == len(ptr) || (ptr[i+1] != '0' && ptr[i+1] != '1')) {
			return errors.New("'~' in a JSON pointer is '~0' or '~1'")
		}
	}
	return nil
}

// removePointer removes the value at ptr (checked by checkPointer) from
// doc; the whole context is masked by maskContext.
func removePointer(doc any, ptr string) {
	if ptr == "" {
		return
	}
	toks := strings.Split(ptr[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	cur := doc
	for i, t := range toks {
		last := i == len(toks)-1
		switch x := cur.(type) {
		case map[string]any:
			if last {
				delete(x, t)
				return
			}
			cur = x[t]
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(x) {
				return
			}
			if last {
				x[n] = nil
				return
			}
			cur = x[n]
		default:
			return
		}
	}
}
