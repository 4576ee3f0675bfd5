package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// TestStepDecisionJSON: a run's decision is written as one JSON object,
// the decision's members in docs/decision.md's order and then "step" and
// "retries", strings written as every policycheck JSON output writes them
// (<, > and & as themselves); a stateless decision of the same history
// is the same members without "step" and "retries"; a run's decision of a
// history that ends with a request has step 0 and no retries.
func TestStepDecisionJSON(t *testing.T) {
	reg := mustRegistry(t, `{"capabilities": [], "tools": [{"name": "get_time"}]}`)
	e := mustEngine(t, reg)
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c<1>&", `{}`), wCall("no<pe>", "c2", `null`)))
	sd, err := e.NewRun().Step(context.Background(), h, nil)
	require.NoError(t, err)

	got, err := sd.MarshalJSON()
	require.NoError(t, err)
	require.True(t, json.Valid(got), "%s", got)
	require.Contains(t, string(got), `"tool_call_id":"c<1>&"`)
	require.Contains(t, string(got), `"tool":"no<pe>"`)
	require.NotContains(t, string(got), `\u003c`)

	// The members: the decision's, in its order, then step and retries.
	d, err := e.Decide(context.Background(), engine.Request{History: h})
	require.NoError(t, err)
	dec, err := d.MarshalJSON()
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(got, dec[:len(dec)-1]), "the decision's members do not come first:\n%s", got)
	require.Equal(t, len(dec)-1, bytes.Index(got, []byte(`,"step":1,"retries":[`)), "step and retries do not follow the decision:\n%s", got)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got, &m))
	require.Equal(t, "1", string(m["step"]))
	var retries []engine.Retry
	require.NoError(t, json.Unmarshal(m["retries"], &retries))
	require.Len(t, retries, 2)

	req, err := e.NewRun().Step(context.Background(), h[:1], nil)
	require.NoError(t, err)
	got, err = req.MarshalJSON()
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(got, []byte(`,"step":0,"retries":[]}`)), "%s", got)
}
