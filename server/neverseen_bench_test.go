package server_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/server"
)

// neverSeenBodies is the side-by-side harness's never-seen request
// (TestSideBySide): {"registry":R,"context":{"user":"load"},"history":H}
// for a generated history of msgs messages drawn from a registry of
// tools tools, with every tool call id given an eight-digit prefix that
// next rewrites in place, so that each request is a conversation the
// server has not seen (variant's ids, without building a new 1.1 MB body
// per request).
type neverSeenBodies struct {
	body []byte
	ids  []int // offsets of each id prefix's eight digits
	n    int
}

func newNeverSeenBodies(msgs, tools int) *neverSeenBodies {
	o := gen.Default(msgs)
	o.Tools = tools
	hist := bytes.ReplaceAll(gen.History(1, o), []byte(`"tool_call_id":"`), []byte(`"tool_call_id":"v00000000-`))
	body := append(append(append(append([]byte(`{"registry":`), gen.Registry(1, o)...), `,"context":{"user":"load"},"history":`...), hist...), '}')
	nb := &neverSeenBodies{body: body}
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`"tool_call_id":"v`))
		if j < 0 {
			break
		}
		i += j + len(`"tool_call_id":"v`)
		nb.ids = append(nb.ids, i)
	}
	return nb
}

// next makes the body a conversation not sent before and returns it.
func (nb *neverSeenBodies) next() []byte {
	nb.n++
	var d [8]byte
	s := strconv.Itoa(nb.n)
	copy(d[:], "00000000"[len(s):])
	copy(d[8-len(s):], s)
	for _, i := range nb.ids {
		copy(nb.body[i:i+8], d[:])
	}
	return nb.body
}

// benchFloor is the side-by-side harness's floor (internal/testkit/
// servetest/floor) as a handler: it reads the body whole into a reused
// buffer and answers reply bytes of JSON, deciding nothing.
type benchFloor struct {
	mu       sync.Mutex
	buf, out []byte
}

func (f *benchFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := int(r.ContentLength); cap(f.buf) < n+1 {
		f.buf = make([]byte, n+1)
	}
	n, err := io.ReadFull(r.Body, f.buf[:cap(f.buf)])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if n == cap(f.buf) {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(f.out)))
	_, _ = w.Write(f.out)
}

// BenchmarkNeverSeen sends the harness's never-seen 1,000-message
// /v1/decide bodies (each its own conversation) through the server's
// handler, with the default configuration serve runs with, at 10 and 100
// tools; floor sends the same bodies, rewritten the same way, through
// the floor's handler answering as many bytes as the server did. Both
// through http.Handler.ServeHTTP with httptest's request and recorder:
// the same HTTP path in one process, no network; and, under loopback/,
// the same handlers behind an httptest server on loopback TCP with one
// keep-alive client in the process. cpu-ns/op is the process's CPU time
// (the collector's included): the floor's over the server's is issue
// 36's never-seen share in process (the handler path leaves out the
// kernel's copy of the body, most of the out-of-process floor's cost;
// loopback/ has it, and the client's, on both sides).
func BenchmarkNeverSeen(b *testing.B) {
	for _, tc := range []struct {
		tools int
		memo  bool
	}{{10, true}, {100, true}, {10, false}, {100, false}} {
		tools := tc.tools
		nb := newNeverSeenBodies(1000, tools)
		opts := []option{}
		name := "tools=" + strconv.Itoa(tools)
		if !tc.memo {
			// The decision memo off: what the policy's evaluation
			// costs where the memo answered (at 10 tools every
			// variant's input document is the same).
			opts, name = append(opts, option(func(c *server.Config) { c.DecisionCache = 0 })), name+"/memo=off"
		}
		srv, err := newServer(opts...)
		if err != nil {
			b.Fatal(err)
		}
		post := func(h http.Handler, body []byte) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", bytes.NewReader(body)))
			if rec.Code != http.StatusOK {
				b.Fatalf("%d: %s", rec.Code, rec.Body)
			}
			return rec
		}
		// The first request compiles the registry's engine.
		reply := post(srv.Handler(), nb.next()).Body.Len()
		out := append(append([]byte(`{"floor":"`), bytes.Repeat([]byte{'x'}, reply-12)...), `"}`...)
		for _, path := range []string{"", "loopback/"} {
			if path != "" && !tc.memo {
				continue
			}
			for _, side := range []string{"sidecar", "floor"} {
				b.Run(name+"/"+path+side, func(b *testing.B) {
					h := srv.Handler()
					if side == "floor" {
						h = &benchFloor{out: out}
					}
					send := func(body []byte) { post(h, body) }
					if path != "" {
						// Over loopback TCP to an httptest server, one
						// client keeping its connection: the process's
						// CPU is the server's, the client's and the
						// kernel's on both sides, as the harness's rate
						// reading pays them (its clients share the
						// machine).
						ts := httptest.NewServer(h)
						defer ts.Close()
						client := ts.Client()
						send = func(body []byte) {
							resp, err := client.Post(ts.URL+"/v1/decide", "application/json", bytes.NewReader(body))
							if err != nil {
								b.Fatal(err)
							}
							_, err = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if err != nil || resp.StatusCode != http.StatusOK {
								b.Fatalf("%d: %v", resp.StatusCode, err)
							}
						}
					}
					b.SetBytes(int64(len(nb.body)))
					b.ReportAllocs()
					cpu := cputime.PerOp(b)
					for b.Loop() {
						send(nb.next())
					}
					cpu()
				})
			}
		}
	}
}
