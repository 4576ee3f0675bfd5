package server_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/require"
)

// TestDecisionIDHeader: every decision's response names the policy
// revision that made it (Policycheck-Policy-Revision, /health's) and,
// with decision logs on, its log event's decision id
// (Policycheck-Decision-Id): a client behind a load balancer knows which
// revision decided and finds the event of each decision. A refused
// request names neither; a server without decision logs names no id.
func TestDecisionIDHeader(t *testing.T) {
	ctx := context.Background()
	col := newCollector(t)
	cfg := []byte("services:\n  logs:\n    url: " + col.URL + "\ndecision_logs:\n  service: logs\n  reporting:\n    trigger: manual\n")
	rs := start(t, testReg(t), withOPAConfig(cfg, "test"))

	postH := func(rs *running, path, body string) (int, http.Header) {
		t.Helper()
		resp, err := rs.client.Post(rs.url+path, "application/json", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	_, h := health(t, rs)
	rev := h.PolicyRevision
	require.NotEmpty(t, rev)
	ids := map[string]bool{}
	for _, req := range []struct{ path, body string }{
		{"/v1/decide", `{"history": ` + testHistory + `}`},
		{"/v1/explain", `{"history": ` + testHistory + `}`},
		{"/v1/runs/r1/decide", `{"offset": 0, "messages": ` + testHistory + `}`},
		{"/v1/decide", `{"history": ` + testHistory + `}`},
	} {
		status, h := postH(rs, req.path, req.body)
		require.Equal(t, http.StatusOK, status, req.path)
		id := h.Get("Policycheck-Decision-Id")
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, id, req.path)
		require.False(t, ids[id], "decision id %s named twice", id)
		require.Equal(t, rev, h.Get("Policycheck-Policy-Revision"), req.path)
		ids[id] = true
	}
	status, hdr := postH(rs, "/v1/decide", `{"history": 1}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Empty(t, hdr.Get("Policycheck-Decision-Id"), "a refused request decides nothing")
	require.Empty(t, hdr.Get("Policycheck-Policy-Revision"), "a refused request decides nothing")

	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(ctx))
	col.mu.Lock()
	logged := map[string]bool{}
	for _, e := range col.events {
		logged[e["decision_id"].(string)] = true
	}
	col.mu.Unlock()
	require.Equal(t, ids, logged, "the events logged are the decisions whose ids the responses named")

	plain := start(t, testReg(t))
	status, hdr = postH(plain, "/v1/decide", `{"history": `+testHistory+`}`)
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, hdr.Get("Policycheck-Decision-Id"), "no decision log, no id")
	require.Equal(t, rev, hdr.Get("Policycheck-Policy-Revision"))
}
