package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

// Two conversations of three messages each, and the step that follows
// either: in staleOld a search revealed search_docs, so the step's
// search_docs call executes; in staleNew the model asked the time, so it
// is not_available_yet. (docs/scaling_test.go drives the same ones
// through real replicas.)
const (
	staleOld = `[
 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "What do the docs say about returns?"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "search_tools", "tool_call_id": "s1", "tool_kind": "tool-search", "args": {"queries": ["docs"]}}]},
 {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "search_tools", "tool_call_id": "s1", "tool_kind": "tool-search", "content": {"discovered_tools": [{"name": "search_docs"}]}}]}
]`
	staleNew = `[
 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "What time is it? Then look up returns."}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "get_time", "tool_call_id": "g1", "args": {}}]},
 {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "get_time", "tool_call_id": "g1", "content": "09:00"}]}
]`
	staleStep = `[{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "search_docs", "tool_call_id": "c1", "args": {"query": "returns"}}]}]`
)

// runReply is the part of a run step's answer these tests read.
type runReply struct {
	Calls []struct {
		Verdict string `json:"verdict"`
	} `json:"calls"`
	Generation string `json:"generation"`
}

// TestRunGenerationRefusesAnotherHistory: a run step carries the
// generation the run's previous answer gave, and a server that holds the
// run with other messages of the same length answers 409, naming both
// generations, instead of deciding on a history that is not the client's.
// Replica A holds run R as staleOld left it; the client's R is staleNew
// (started on replica B). Its step at offset 3, sent to A with B's
// generation, is refused, and A decides nothing: the client starting R
// again at offset 0 gets the true history's verdict. The client that
// built A's run gets its step decided; a step with no generation is a
// 400 naming /generation.
func TestRunGenerationRefusesAnotherHistory(t *testing.T) {
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	a, b := start(t, withRegistry(reg)), start(t, withRegistry(reg))
	post := func(rs *running, path string, body map[string]any) (int, runReply, []byte) {
		t.Helper()
		status, out := rs.post(t, path, mustJSON(t, body))
		var r runReply
		if status == http.StatusOK {
			require.NoError(t, json.Unmarshal(out, &r), string(out))
		}
		return status, r, out
	}
	// Replica A holds R as the old conversation left it.
	status, old, out := post(a, "/v1/runs/R/decide", map[string]any{"offset": 0, "messages": json.RawMessage(staleOld)})
	require.Equal(t, http.StatusOK, status, string(out))
	// The client's R is the new conversation, on replica B.
	status, cur, out := post(b, "/v1/runs/R/decide", map[string]any{"offset": 0, "messages": json.RawMessage(staleNew)})
	require.Equal(t, http.StatusOK, status, string(out))
	assert.NotEqual(t, old.Generation, cur.Generation, "same length, other messages: other generations")

	// R hashes back to A: the client's step, at the length A holds.
	step := map[string]any{"offset": 3, "messages": json.RawMessage(staleStep)}
	if cur.Generation != "" {
		step["generation"] = cur.Generation
	}
	status, d, out := post(a, "/v1/runs/R/decide", step)
	require.Equal(t, http.StatusConflict, status, "A decided on a history that is not the client's: %s", out)
	e := decodeError(t, out).Error
	assert.Equal(t, "run_conflict", e.Code)
	assert.Contains(t, e.Message, "not the ones this client sent")
	assert.Contains(t, e.Message, old.Generation)
	assert.Contains(t, e.Message, cur.Generation)
	assert.Empty(t, d.Calls)
	// The client's 409 path: the whole history with offset 0.
	status, d, out = post(a, "/v1/runs/R/decide", map[string]any{"offset": 0,
		"messages": json.RawMessage(fmt.Sprintf("[%s, %s]", staleNew[1:len(staleNew)-1], staleStep[1:len(staleStep)-1]))})
	require.Equal(t, http.StatusOK, status, string(out))
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.NotAvailableYet, d.Calls[0].Verdict, "the true history never searched")

	// The client that built a run gets its step decided with its
	// generation, and a new one back.
	status, started, out := post(a, "/v1/runs/S/decide", map[string]any{"offset": 0, "messages": json.RawMessage(staleOld)})
	require.Equal(t, http.StatusOK, status, string(out))
	s0 := started.Generation
	assert.NotEqual(t, old.Generation, s0, "the generation covers the run id too: runs R and S started alike differ")
	status, d, out = post(a, "/v1/runs/S/decide", map[string]any{"offset": 3, "messages": json.RawMessage(staleStep), "generation": s0})
	require.Equal(t, http.StatusOK, status, string(out))
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict)
	assert.NotEqual(t, s0, d.Generation)

	// No generation: 400 (send: rs.post would add the last one).
	status, out = a.send(t, http.MethodPost, "/v1/runs/S/decide", strings.NewReader(`{"offset": 4, "messages": []}`))
	require.Equal(t, http.StatusBadRequest, status, string(out))
	assert.Equal(t, "/generation", decodeError(t, out).Error.Pointer)
}
