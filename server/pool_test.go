package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// TestPooledBodiesAreNotKept: bodies of 64 KiB and more are read into
// pooled buffers and reused once answered. Four clients at once send
// growing histories (which the prefix cache keeps from their second
// sight and then resumes), never-seen ones, explanations, facts and
// requests with approvals to a server that overwrites every body it
// reuses; every answer is the answer of a server that pools nothing, and
// the prefix cache never holds a body that was reused.
func TestPooledBodiesAreNotKept(t *testing.T) {
	o := gen.Default(150)
	o.CompactionRate = 0.05
	reg := json.RawMessage(gen.Registry(5, o))
	pooled := start(t, server.PoisonBodies)
	kept := start(t, server.KeepBodies)

	type req struct{ path, body string }
	var streams [][]req
	for k := range 4 {
		msgs := gen.Messages(int64(20+k), o)
		var s []req
		for n := 110; n <= len(msgs); n++ {
			doc := map[string]any{"registry": reg, "context": map[string]any{"user": "u" + strconv.Itoa(k), "n": n}, "history": toRaw(msgs[:n])}
			path := "/v1/decide"
			switch n % 7 {
			case 3:
				path = "/v1/explain"
			case 4:
				path = "/v1/facts"
			case 5:
				path = "/v1/facts?format=input"
			case 6:
				doc["approvals"] = map[string]any{}
			}
			s = append(s, req{path, string(mustJSON(t, doc))})
			if n%5 == 0 { // a conversation never seen again
				other := gen.Messages(int64(1000*k+n), o)
				s = append(s, req{"/v1/decide", string(mustJSON(t, map[string]any{"registry": reg, "history": toRaw(other[:n])}))})
			}
		}
		streams = append(streams, s)
	}
	require.GreaterOrEqual(t, len(streams[0][0].body), 64<<10, "the bodies are pooled")
	// Bodies past the 2 MiB read up front grow through pooled buffers.
	big := o
	big.Messages = 2600
	msgs := gen.Messages(30, big)
	var s []req
	for n := 2590; n <= 2600; n++ {
		s = append(s, req{"/v1/decide", string(mustJSON(t, map[string]any{"registry": reg, "history": toRaw(msgs[:n])}))})
	}
	require.Greater(t, len(s[0].body), 2<<20)
	streams = append(streams, s)

	want := make([][]string, len(streams))
	for k, s := range streams {
		for _, r := range s {
			status, out := kept.post(t, r.path, []byte(r.body))
			require.Equal(t, http.StatusOK, status, "%s", out)
			want[k] = append(want[k], string(out))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for k, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, r := range s {
				resp, err := pooled.client.Post(pooled.url+r.path, "application/json", bytes.NewReader([]byte(r.body)))
				if err != nil {
					errs <- err.Error()
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != want[k][i] {
					errs <- fmt.Sprintf("client %d request %d (%s): got %.300s, want %.300s", k, i, r.path, got, want[k][i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	reused, misreused := server.BodiesReused(pooled.srv)
	require.Positive(t, reused, "bodies were reused")
	require.Zero(t, misreused, "a body the prefix cache held was reused")
	require.Equal(t, reused, int64(metricValue(t, pooled, "policycheck_request_bodies_reused_total")))
	held := metricValue(t, pooled, "policycheck_request_body_pool_bytes")
	require.Positive(t, held, "the pool holds the buffers given back")
	require.LessOrEqual(t, held, float64(64<<20))
	m := prefixMetrics(t, pooled)
	require.Positive(t, m["hit"], "growing histories resumed")
	kr, _ := server.BodiesReused(kept.srv)
	require.Zero(t, kr)

	// A run keeps the messages it appends: its bodies are never pooled.
	msgs = gen.Messages(7, o)
	prime := mustJSON(t, map[string]any{"offset": 0, "registry": reg, "messages": toRaw(msgs[:120])})
	require.GreaterOrEqual(t, len(prime), 64<<10)
	status, out := pooled.post(t, "/v1/runs/r/decide", prime)
	require.Equal(t, http.StatusOK, status, "%s", out)
	after, _ := server.BodiesReused(pooled.srv)
	require.Equal(t, reused, after, "a run's body was pooled")
}

// TestNoBodyPooledWithLogsOrShadow: a decision log's and a shadow
// policy's workers read a decision's context after it is answered, so a
// server with either reuses no body.
func TestNoBodyPooledWithLogsOrShadow(t *testing.T) {
	o := gen.Default(150)
	reg, err := loader.ParseRegistry("gen", gen.Registry(5, o))
	require.NoError(t, err)
	body := mustJSON(t, map[string]any{"context": map[string]any{"user": "u"}, "history": toRaw(gen.Messages(3, o)[:120])})
	require.GreaterOrEqual(t, len(body), 64<<10)
	policies := filepath.Join(conformance.ModuleRoot(), "examples", "policies")
	col := newCollector(t)
	logCfg := []byte("services:\n  c:\n    url: " + col.URL + "\ndecision_logs:\n  service: c\n  reporting:\n    trigger: manual\n")
	for name, opts := range map[string][]option{
		"decision log": {withOPAConfig(logCfg, "pool")},
		"shadow":       {withShadow(policies)},
		"neither":      nil,
	} {
		rs := start(t, append(opts, withRegistry(reg))...)
		for range 3 {
			status, out := rs.post(t, "/v1/decide", body)
			require.Equal(t, http.StatusOK, status, "%s: %s", name, out)
		}
		reused, _ := server.BodiesReused(rs.srv)
		if name == "neither" {
			require.Positive(t, reused, name)
		} else {
			require.Zero(t, reused, name)
		}
	}
}
