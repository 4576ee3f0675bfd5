package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// TestRunHistoryLimits: a run is held to the history limits of the whole
// history it holds, as /v1/decide is held to them for the same history,
// not only each step's batch. A run that grew step by step past
// MaxParts or MaxBytes (each step under them) was decided, and held,
// while the one-shot decision of the same history is a 413: the run
// endpoint let a client park a history of any size on the server,
// MaxMessages (100,000 by default) steps of up to MaxBody each.
func TestRunHistoryLimits(t *testing.T) {
	msgs := splitHistory(t, []byte(testHistory)) // two messages, one part each
	whole := joinMessages(append(append([]json.RawMessage{}, msgs...), msgs...))
	for _, tc := range []struct {
		note string
		lim  loader.Limits
	}{
		{note: "parts", lim: loader.Limits{MaxParts: 3}},
		// The four messages, compact, are over it; two are under.
		{note: "bytes", lim: loader.Limits{MaxBytes: int64(len(whole) - 1)}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			rs := start(t, testReg(t), withLimits(tc.lim))
			status, out := rs.post(t, "/v1/decide", mustJSON(t, map[string]any{"history": json.RawMessage(whole)}))
			require.Equal(t, http.StatusRequestEntityTooLarge, status, "one-shot: %s", out)

			status, out = rs.post(t, "/v1/runs/grow/decide", mustJSON(t, map[string]any{"offset": 0, "messages": msgs}))
			require.Equal(t, http.StatusOK, status, string(out))
			status, out = rs.post(t, "/v1/runs/grow/decide", mustJSON(t, map[string]any{"offset": 2, "messages": msgs}))
			require.Equal(t, http.StatusRequestEntityTooLarge, status, "the run grew past the limit its whole history is held to: %s", out)
			e := decodeError(t, out).Error
			assert.Equal(t, server.CodeLimit, e.Code)
			assert.Equal(t, "/messages/1", e.Pointer, "the first message past the limit")
			assert.Equal(t, "/3", e.HistoryPointer)
			// The run is as it was: its two messages, and a step within
			// the limit is still decided.
			status, out = rs.post(t, "/v1/runs/grow/decide", mustJSON(t, map[string]any{"offset": 2, "messages": []json.RawMessage{}}))
			require.Equal(t, http.StatusOK, status, string(out))
		})
	}
}
