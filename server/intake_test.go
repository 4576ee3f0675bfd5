package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// TestRunRetryAccounting: the run endpoint decides through engine.Run, so
// its answers carry the library's retry accounting (spec X8): the first
// availability refusal of a name is free, the next is charged, and a
// charged refusal at the budget aborts with the reference's message.
func TestRunRetryAccounting(t *testing.T) {
	reg, err := loader.ParseRegistry("test", []byte(`{"capabilities":[{"id":"vault","defer_loading":true}],`+
		`"tools":[{"name":"get_time"},{"name":"secret_op","capability":"vault"}]}`))
	require.NoError(t, err)
	rs := start(t, withRegistry(reg))
	call := func(id string) string {
		return `{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"secret_op","args":{},"tool_call_id":"` + id + `"}]}`
	}
	retry := `{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"not yet","tool_name":"secret_op"}]}`
	type step struct {
		Step    int                  `json:"step"`
		Calls   []engine.CallVerdict `json:"calls"`
		Retries []engine.Retry       `json:"retries"`
	}
	steps := []struct {
		offset int
		msgs   string
	}{
		{0, `[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]},` + call("c1") + `]`},
		{2, `[` + retry + `,` + call("c2") + `]`},
		{4, `[` + retry + `,` + call("c3") + `]`},
	}
	var got []step
	for _, s := range steps {
		status, body := rs.post(t, "/v1/runs/acct/decide", []byte(fmt.Sprintf(`{"offset": %d, "messages": %s}`, s.offset, s.msgs)))
		require.Equal(t, 200, status, string(body))
		var st step
		require.NoError(t, json.Unmarshal(body, &st))
		require.Len(t, st.Retries, 1, string(body))
		require.Equal(t, engine.NotAvailableYet, st.Calls[0].Verdict)
		got = append(got, st)
	}
	require.Equal(t, []int{1, 2, 3}, []int{got[0].Step, got[1].Step, got[2].Step})
	require.True(t, got[0].Retries[0].Free, "the first availability refusal is free")
	require.False(t, got[0].Retries[0].Charged)
	require.True(t, got[1].Retries[0].Charged)
	require.False(t, got[1].Retries[0].Exceeded)
	require.Equal(t, 1, got[2].Retries[0].Count)
	require.True(t, got[2].Retries[0].Exceeded)
	require.Equal(t, "Tool 'secret_op' exceeded max retries count of 1.", got[2].Retries[0].Message)
}

// TestSchemaIsOptIn: the decoder alone validates histories unless the
// server is told to use the JSON Schema too.
func TestSchemaIsOptIn(t *testing.T) {
	body := []byte(`{"history": ` + testHistory + `}`)
	for _, c := range []struct {
		opts   []option
		checks string
	}{
		{nil, "0"},
		{[]option{withSchema()}, "2"},
	} {
		rs := start(t, append([]option{testReg(t), withPrefixCache(0)}, c.opts...)...)
		for range 2 {
			status, out := rs.post(t, "/v1/decide", body)
			require.Equal(t, 200, status, string(out))
		}
		// Rejected by the decoder either way, at the same pointer.
		status, out := rs.post(t, "/v1/decide", []byte(`{"history": [{"kind": "request", "parts": [{"part_kind": "x"}]}]}`))
		require.Equal(t, 400, status)
		require.Equal(t, "/history/0/parts/0/part_kind", decodeError(t, out).Error.Pointer)
		_, metrics := rs.do(t, http.MethodGet, "/metrics", nil)
		require.Contains(t, string(metrics), "policycheck_history_schema_checks_total "+c.checks+"\n")
	}
}

// requireBodyTimeout reads the answer on conn: 408, the body's timeout.
func requireBodyTimeout(t *testing.T, conn net.Conn) {
	t.Helper()
	// A server that never answers fails the test in seconds, not at go
	// test's timeout.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(out))
	require.Equal(t, server.CodeBodyTimeout, decodeError(t, out).Error.Code)
}

// TestSlowBodyIsCutOff: a client that sends its body a byte at a time is
// answered 408 once the body deadline passes, and its connection closed.
func TestSlowBodyIsCutOff(t *testing.T) {
	rs := start(t, testReg(t), withBodyTimeout(300*time.Millisecond))
	conn, err := net.Dial("tcp", rs.addr)
	require.NoError(t, err)
	defer conn.Close()
	body := `{"history": ` + testHistory + `}`
	_, err = fmt.Fprintf(conn, "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	start := time.Now()
	done := make(chan struct{})
	go func() { // one byte every 50 ms: the whole body would take seconds
		defer close(done)
		for i := 0; i < len(body); i++ {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	requireBodyTimeout(t, conn)
	require.Less(t, time.Since(start), time.Duration(len(body))*50*time.Millisecond/2, "cut off well before the body would have arrived")
	conn.Close()
	<-done
}

// TestDeclaredLengthIsNotAllocated: a body that declares 60 MB and sends
// a few bytes costs the server its bytes, not the declaration.
func TestDeclaredLengthIsNotAllocated(t *testing.T) {
	rs := start(t, testReg(t), withBodyTimeout(500*time.Millisecond))
	const clients = 8
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, clients)
	for i := range conns {
		conn, err := net.Dial("tcp", rs.addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"history\": [", 60<<20)
		require.NoError(t, err)
		conns[i] = conn
	}
	for _, conn := range conns { // each is cut off at the body deadline
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(clients*(4<<20)), "%d bodies declaring 60 MB allocated %d bytes", clients, allocated)
}

// TestTimeoutCoversDecode: the server's timeout starts when the body has
// been read, so a history whose decoding alone outlasts it fails closed
// even though the policy itself would have been quick.
func TestTimeoutCoversDecode(t *testing.T) {
	o := gen.Default(10_000)
	o.Tools = 10
	hist := gen.History(1, o)
	regDoc := gen.Registry(1, o)
	rs := start(t, withTimeout(2*time.Millisecond), withPrefixCache(0))
	body := []byte(`{"registry": ` + string(regDoc) + `, "history": ` + string(hist) + `}`)
	status, out := rs.post(t, "/v1/decide", body)
	require.Equal(t, 200, status, string(out[:min(len(out), 300)]))
	var d engine.Decision
	require.NoError(t, json.Unmarshal(out, &d))
	require.Empty(t, d.Available, "fails closed")
	require.NotEmpty(t, d.Errors)
	require.True(t, strings.Contains(strings.Join(d.Errors, " "), "deadline"), "%v", d.Errors)
}

// TestRunLimitPointsIntoRequest: a run that would grow past the message
// limit is refused at the first message past it, named in the request and
// in the run's history.
func TestRunLimitPointsIntoRequest(t *testing.T) {
	lim := loader.DefaultLimits()
	lim.MaxMessages = 4
	rs := start(t, testReg(t), withLimits(lim))
	msgs := splitHistory(t, []byte(testHistory))
	status, body := rs.post(t, "/v1/runs/l/decide", mustJSON(t, map[string]any{"offset": 0, "messages": msgs}))
	require.Equal(t, 200, status, string(body))
	three := []json.RawMessage{msgs[0], msgs[1], msgs[0]}
	status, body = rs.post(t, "/v1/runs/l/decide", mustJSON(t, map[string]any{"offset": 2, "messages": three}))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(body))
	e := decodeError(t, body)
	require.Equal(t, server.CodeLimit, e.Error.Code)
	require.Equal(t, "/messages/2", e.Error.Pointer)
	require.Equal(t, "/4", e.Error.HistoryPointer)
}

// TestContextLimit: a context over MaxContext is refused at /context,
// before it is converted; a server may raise the bound.
func TestContextLimit(t *testing.T) {
	big := `{"notes": "` + strings.Repeat("x", 2000) + `"}`
	body := []byte(`{"history": ` + testHistory + `, "context": ` + big + `}`)
	rs := start(t, testReg(t), withMaxContext(1000))
	status, out := rs.post(t, "/v1/decide", body)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(out))
	e := decodeError(t, out)
	require.Equal(t, server.CodeLimit, e.Error.Code)
	require.Equal(t, "/context", e.Error.Pointer)
	status, out = rs.post(t, "/v1/runs/c/decide", []byte(`{"offset": 0, "messages": [], "context": `+big+`}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(out))

	roomy := start(t, testReg(t), withMaxContext(4000))
	status, out = roomy.post(t, "/v1/decide", body)
	require.Equal(t, 200, status, string(out))
}

// TestDuplicateHistoryLastWins: of duplicate "history" members the
// decision is the last member's, as encoding/json would read the body: an
// invalid first member does not refuse a valid last one, and the last
// member's messages are the ones decided.
func TestDuplicateHistoryLastWins(t *testing.T) {
	rs := start(t, testReg(t))
	status, want := rs.post(t, "/v1/decide", []byte(`{"history": `+testHistory+`}`))
	require.Equal(t, http.StatusOK, status, string(want))
	status, got := rs.post(t, "/v1/decide", []byte(`{"history": [{"kind": "nope", "parts": []}], "history": `+testHistory+`}`))
	require.Equal(t, http.StatusOK, status, string(got))
	require.JSONEq(t, string(want), string(got))
	status, empty := rs.post(t, "/v1/decide", []byte(`{"history": []}`))
	require.Equal(t, http.StatusOK, status, string(empty))
	status, got = rs.post(t, "/v1/decide", []byte(`{"history": `+testHistory+`, "history": []}`))
	require.Equal(t, http.StatusOK, status, string(got))
	require.JSONEq(t, string(empty), string(got))
}
