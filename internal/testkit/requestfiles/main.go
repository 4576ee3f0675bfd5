// Command requestfiles writes the coverage counters of exactly one
// incremental run step (a run primed with 1,000 generated messages, three
// steps warm, then the fourth) and of exactly one never-seen /v1/decide
// (1,000 messages, after one warm request), each into a directory of its
// own under the directory given, so that scripts/request-files.sh can
// list the files of the module a request passes through. It is built with
// -cover -covermode=atomic -coverpkg=./...; counters are cleared just
// before the measured request.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/coverage"

	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/server"
)

func check(err error) {
	if err != nil {
		panic(err)
	}
}

func mustJSON(v any) []byte { b, err := json.Marshal(v); check(err); return b }

func raw(msgs [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m
	}
	return out
}

func post(h http.Handler, path string, body []byte) []byte {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != 200 {
		panic(fmt.Sprint(rec.Code, rec.Body.String()))
	}
	return rec.Body.Bytes()
}

func dump(dir string) {
	check(os.MkdirAll(dir, 0o755))
	check(coverage.WriteCountersDir(dir))
	check(coverage.WriteMetaDir(dir))
}

func main() {
	out := os.Args[1]
	measure(func() { check(coverage.ClearCounters()) }, func(k string) { dump(out + "/" + k) })
}

// measure makes the two requests, calling clear just before each measured
// one and done with its name ("step", "decide") just after; it panics if
// a request is not answered 200.
func measure(clear func(), done func(name string)) {
	o := gen.Default(1000)
	o.Tools = 10
	reg := gen.Registry(1, o)
	grow := o
	grow.Messages = 1010
	all := gen.Messages(100, grow)
	srv, err := server.New(server.DefaultConfig())
	check(err)
	h := srv.Handler()
	var ans struct{ Generation string }
	check(json.Unmarshal(post(h, "/v1/runs/step/decide", mustJSON(map[string]any{"offset": 0, "registry": json.RawMessage(reg), "messages": raw(all[:1000])})), &ans))
	step := func(off int) []byte {
		return mustJSON(map[string]any{"offset": off, "messages": raw(all[off : off+1]), "context": json.RawMessage(`{"user": "load"}`), "generation": ans.Generation})
	}
	for off := 1000; off < 1003; off++ {
		check(json.Unmarshal(post(h, "/v1/runs/step/decide", step(off)), &ans))
	}
	body := step(1003)
	clear()
	post(h, "/v1/runs/step/decide", body)
	done("step")

	hist := gen.History(1, o)
	mk := func(n int) []byte {
		hh := bytes.ReplaceAll(hist, []byte(`"tool_call_id":"`), []byte(fmt.Sprintf(`"tool_call_id":"v%d-`, n)))
		return append(append(append(append([]byte(`{"registry":`), reg...), `,"context":{"user":"load"},"history":`...), hh...), '}')
	}
	post(h, "/v1/decide", mk(1))
	b2 := mk(2)
	clear()
	post(h, "/v1/decide", b2)
	done("decide")
}
