package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
	"github.com/policycheck/policycheck/internal/testkit/syncbuf"
)

// Several Gateways sharing one session store are replicas of one
// gateway (issue 46): these tests run them in one process, on a real
// Redis server where they say so.

// sharedLog is a decision log several goroutines write.
type sharedLog struct{ syncbuf.Buffer }

// decisions are a decision log's decisions by tool_call_id.
func (s *sharedLog) decisions(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for _, line := range bytes.Split(bytes.TrimSpace(s.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e struct {
			Call     string          `json:"tool_call_id"`
			Decision json.RawMessage `json:"decision"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		out[e.Call] = e.Decision
	}
	return out
}

// replica is one gateway of a shared store, its upstream and its log.
type replica struct {
	g   *gateway.Gateway
	f   *fakeUpstream
	log *sharedLog
}

// replicaRegistry is testRegistry with large retry budgets for the two
// tools the script fails again and again (an invalid read, a denied
// transfer): two clients of one session may fail one many times in a
// row, which would stop the session (spec X8,
// TestRetryBudgetStopsTheSession).
var replicaRegistry = strings.NewReplacer(
	"  - name: read_file\n    upstream: files\n", "  - name: read_file\n    upstream: files\n    max_retries: 1000\n",
	"  - name: transfer_funds\n    upstream: files\n", "  - name: transfer_funds\n    upstream: files\n    max_retries: 1000\n",
).Replace(testRegistry)

func newReplica(t testing.TB, st sessionstore.Store, extra func(*gateway.Config)) *replica {
	t.Helper()
	r := &replica{f: newFakeUpstream(), log: &sharedLog{}}
	reg := mustRegistry(t, replicaRegistry)
	r.g = newTestGateway(t, r.f, func(c *gateway.Config) {
		c.Registry = reg
		c.Logger = nil
		c.DecisionLog = r.log
		if st != nil {
			gateway.UseStore(c, st)
		}
		if extra != nil {
			extra(c)
		}
	})
	return r
}

func redisStore(t testing.TB, srv *redistest.Server, o sessionstore.Options) sessionstore.Store {
	t.Helper()
	st, err := sessionstore.NewRedis(context.Background(), srv.URL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// sharedCluster is the Redis Cluster the package's tests share (closed
// by TestMain).
var sharedCluster redistest.SharedCluster

// clusterStore is a store on the shared three-node Redis Cluster, empty.
func clusterStore(t testing.TB, o sessionstore.Options) sessionstore.Store {
	t.Helper()
	st, err := sessionstore.NewRedisCluster(context.Background(), sharedCluster.Get(t).URL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// sharedStores runs f on a store on one Redis server and on one on a
// three-node Redis Cluster (a session's keys on one node, its id's index
// most likely on another): replicas work alike on both.
func sharedStores(t *testing.T, o sessionstore.Options, f func(t *testing.T, st sessionstore.Store)) {
	t.Run("redis", func(t *testing.T) { f(t, redisStore(t, redistest.Start(t, false), o)) })
	t.Run("cluster", func(t *testing.T) { f(t, clusterStore(t, o)) })
}

// scriptCall is one call of the scripted session.
type scriptCall struct {
	name string
	args map[string]any
}

// script is a session's i-th call: a search that reveals write_file,
// the revealed tool, a read, an invalid read (charged), a denied
// transfer, a capability load (then, as loading it again is a charged
// retry of budget 1, a search) and its tool, a call needing approval.
func script(i int) scriptCall {
	if i%8 == 5 && i >= 8 {
		return scriptCall{"search_tools", map[string]any{"queries": []any{"refund"}}}
	}
	switch i % 8 {
	case 0:
		return scriptCall{"search_tools", map[string]any{"queries": []any{"write"}}}
	case 1:
		return scriptCall{"files/write_file", map[string]any{"n": float64(i)}}
	case 2:
		return scriptCall{"read_file", map[string]any{"path": fmt.Sprintf("/f%d", i)}}
	case 3:
		return scriptCall{"read_file", map[string]any{}}
	case 4:
		return scriptCall{"transfer_funds", map[string]any{"n": float64(i)}}
	case 5:
		return scriptCall{"load_capability", map[string]any{"id": "refunds"}}
	case 6:
		return scriptCall{"issue_refund", map[string]any{"n": float64(i)}}
	}
	return scriptCall{"deploy", map[string]any{"n": float64(i)}}
}

func callErr(cs *mcp.ClientSession, c scriptCall) (string, bool, error) {
	return gatewaytest.Call(cs, c.name, c.args)
}

// storedCalls are the calls of a session's history, in order.
func storedCalls(t testing.TB, history []byte) []scriptCall {
	t.Helper()
	var msgs []struct {
		Kind  string `json:"kind"`
		Parts []struct {
			PartKind string         `json:"part_kind"`
			ToolName string         `json:"tool_name"`
			Args     map[string]any `json:"args"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(history, &msgs); err != nil {
		t.Fatal(err)
	}
	var out []scriptCall
	for _, m := range msgs {
		if m.Kind == "response" {
			out = append(out, scriptCall{m.Parts[0].ToolName, m.Parts[0].Args})
		}
	}
	return out
}

// sameAsOneGateway checks that every decision the replicas logged is
// the one a single gateway makes on the same session: the session's
// calls, as the store ordered them, made again to a gateway of its own.
func sameAsOneGateway(t *testing.T, history []byte, logs ...*sharedLog) {
	t.Helper()
	calls := storedCalls(t, history)
	ref := newReplica(t, nil, nil)
	cs := connect(t, ref.g, gateway.Principal{Name: "alice"}, nil)
	for _, c := range calls {
		if _, _, err := callErr(cs, c); err != nil {
			t.Fatal(err)
		}
	}
	want := ref.log.decisions(t)
	got := map[string]json.RawMessage{}
	for _, l := range logs {
		for id, d := range l.decisions(t) {
			if _, dup := got[id]; dup {
				t.Fatalf("%s was decided twice", id)
			}
			got[id] = d
		}
	}
	if len(got) != len(want) || len(want) != len(calls) {
		t.Fatalf("%d decisions logged by the replicas, %d by one gateway, %d calls stored", len(got), len(want), len(calls))
	}
	for id, w := range want {
		if !bytes.Equal(got[id], w) {
			t.Fatalf("%s: the replicas decided\n%s\none gateway decides\n%s", id, got[id], w)
		}
	}
}

// TestTwoReplicasServeOneSessionConcurrently: two gateways on one Redis
// (a server, a cluster) serve one session at once, each client calling
// through its own replica: no message is lost or reordered (every call
// is in the history once, each answer right after its call), and every
// decision is the one a single gateway makes on the session.
func TestTwoReplicasServeOneSessionConcurrently(t *testing.T) {
	sharedStores(t, sessionstore.Options{}, testTwoReplicasServeOneSessionConcurrently)
}

func testTwoReplicasServeOneSessionConcurrently(t *testing.T, st sessionstore.Store) {
	a, b := newReplica(t, st, nil), newReplica(t, st, nil)
	alice := gateway.Principal{Name: "alice"}
	ca, cb := connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)
	const each = 24
	var wg sync.WaitGroup
	for _, cs := range []*mcp.ClientSession{ca, cb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, _, err := callErr(cs, script(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ids := a.g.SessionIDs()
	if len(ids) != 1 || len(b.g.SessionIDs()) != 1 || b.g.SessionIDs()[0] != ids[0] {
		t.Fatalf("the replicas hold sessions %v and %v, want one shared", ids, b.g.SessionIDs())
	}
	history, ok := b.g.History(ids[0])
	if !ok {
		t.Fatal("no history")
	}
	var msgs []struct {
		Kind  string `json:"kind"`
		Parts []struct {
			ID string `json:"tool_call_id"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(history, &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4*each {
		t.Fatalf("%d messages, want %d", len(msgs), 4*each)
	}
	for i := 0; i < len(msgs); i += 2 {
		want := fmt.Sprintf("gw_%d", i/2+1)
		if msgs[i].Kind != "response" || msgs[i].Parts[0].ID != want || msgs[i+1].Kind != "request" || msgs[i+1].Parts[0].ID != want {
			t.Fatalf("messages %d and %d are not call %s and its answer", i, i+1, want)
		}
	}
	sameAsOneGateway(t, history, a.log, b.log)
}

// TestReplicaResumesFromTheStoredLength: a session served by two
// replicas in turn, 10,000 calls: each call gives the replica's run only
// the messages it has not seen (the other replica's last call and its
// answer, then its own call): no call derives the session again.
func TestReplicaResumesFromTheStoredLength(t *testing.T) {
	calls := racetest.Size(10_000, 500)
	st := sessionstore.NewMemory(sessionstore.Options{})
	a, b := newReplica(t, st, nil), newReplica(t, st, nil)
	alice := gateway.Principal{Name: "alice"}
	cs := [2]*mcp.ClientSession{connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)}
	gs := [2]*gateway.Gateway{a.g, b.g}
	most := int64(0)
	for i := range calls {
		before := gateway.Derived(a.g) + gateway.Derived(b.g)
		c := scriptCall{"read_file", map[string]any{"path": "/x"}}
		if _, isErr, err := callErr(cs[i%2], c); err != nil || isErr {
			t.Fatalf("call %d: %v %v", i, err, isErr)
		}
		most = max(most, gateway.Derived(a.g)+gateway.Derived(b.g)-before)
	}
	// A replica's call: the other's call and answer, its own answer
	// pending, its own call.
	if most > 4 {
		t.Fatalf("a call gave its run %d messages, want at most 4", most)
	}
	for i, g := range gs {
		if d := gateway.Derived(g); d > int64(2*calls) {
			t.Fatalf("replica %d derived %d messages of a %d-message session", i, d, 2*calls)
		}
	}
	t.Logf("%d calls alternating two replicas: at most %d messages derived by a call", calls, most)
}

// TestResumeOnRedis is TestReplicaResumesFromTheStoredLength on Redis (a
// server, a cluster), shorter.
func TestResumeOnRedis(t *testing.T) {
	sharedStores(t, sessionstore.Options{}, testResumeOnRedis)
}

func testResumeOnRedis(t *testing.T, st sessionstore.Store) {
	a, b := newReplica(t, st, nil), newReplica(t, st, nil)
	alice := gateway.Principal{Name: "alice"}
	cs := [2]*mcp.ClientSession{connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)}
	const calls = 200
	most := int64(0)
	for i := range calls {
		before := gateway.Derived(a.g) + gateway.Derived(b.g)
		if _, _, err := callErr(cs[i%2], script(i)); err != nil {
			t.Fatal(err)
		}
		most = max(most, gateway.Derived(a.g)+gateway.Derived(b.g)-before)
	}
	if most > 4 {
		t.Fatalf("a call gave its run %d messages, want at most 4", most)
	}
	history, _ := a.g.History(a.g.SessionIDs()[0])
	sameAsOneGateway(t, history, a.log, b.log)
}

// racingStore lets another replica's call in between a replica's load
// and its append, as a replica stalled past its lease (SIGSTOP) sees it
// when it resumes: its lock is granted (its lease ran out and was taken
// and given back), its view of the history is older than the store's.
type racingStore struct {
	sessionstore.Store
	before func()
}

// Lock grants the lease at once: the stalled replica's ran out.
func (r *racingStore) Lock(context.Context, string) (func(), error) { return func() {}, nil }

func (r *racingStore) Append(ctx context.Context, key string, at int, entries ...sessionstore.Entry) error {
	if f := r.before; f != nil {
		r.before = nil
		f()
	}
	return r.Store.Append(ctx, key, at, entries...)
}

// TestStalledReplicaNeverActsOnAnOldState: a replica whose view of the
// session is older than the store's when it writes its call carries
// nothing out (the call fails closed, the upstream never sees it); its
// next call is decided on the store's state, as a single gateway
// decides it.
func TestStalledReplicaNeverActsOnAnOldState(t *testing.T) {
	srv := redistest.Start(t, false)
	st := redisStore(t, srv, sessionstore.Options{})
	race := &racingStore{Store: st}
	a, b := newReplica(t, race, nil), newReplica(t, st, nil)
	alice := gateway.Principal{Name: "alice"}
	ca, cb := connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)
	if _, _, err := callErr(ca, script(0)); err != nil { // a: search reveals write_file
		t.Fatal(err)
	}
	race.before = func() {
		if _, _, err := callErr(cb, script(2)); err != nil { // b: a read, meanwhile
			t.Error(err)
		}
	}
	ran := a.f.calls.Load()
	text, isErr, err := callErr(ca, script(1))
	if err != nil {
		t.Fatal(err)
	}
	if !isErr || !strings.Contains(text, "changed on another gateway replica") || a.f.calls.Load() != ran {
		t.Fatalf("a call decided on an old state: %q (error %v), upstream calls %d → %d", text, isErr, ran, a.f.calls.Load())
	}
	// a's next call: in step with the store again.
	if text, isErr, err := callErr(ca, script(1)); err != nil || isErr {
		t.Fatalf("the revealed tool after the conflict: %q %v %v", text, isErr, err)
	}
	history, _ := a.g.History(a.g.SessionIDs()[0])
	calls := storedCalls(t, history)
	if len(calls) != 3 {
		t.Fatalf("%d calls stored, want 3 (the refused one is not)", len(calls))
	}
	logA := a.log.decisions(t)
	delete(logA, "gw_2") // the refused call's decision, on the old state: logged, never carried out
	a2 := &sharedLog{}
	for id, d := range logA {
		fmt.Fprintf(a2, `{"tool_call_id":%q,"decision":%s}`+"\n", id, d)
	}
	sameAsOneGateway(t, history, a2, b.log)
}

// TestSessionSizeLimitFailsClosed: a shared session past
// --max-session-bytes fails its calls closed, on every replica, with a
// message that says why.
func TestSessionSizeLimitFailsClosed(t *testing.T) {
	srv := redistest.Start(t, false)
	st := redisStore(t, srv, sessionstore.Options{MaxBytes: 4000})
	limit := func(c *gateway.Config) { c.MaxSessionBytes = 4000 }
	a, b := newReplica(t, st, limit), newReplica(t, st, limit)
	alice := gateway.Principal{Name: "alice"}
	cs := [2]*mcp.ClientSession{connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)}
	for i := range 40 {
		text, isErr, err := callErr(cs[i%2], scriptCall{"read_file", map[string]any{"path": "/x"}})
		if err != nil {
			t.Fatal(err)
		}
		if isErr {
			if !strings.Contains(text, "4000 bytes") {
				t.Fatalf("call %d refused with %q", i, text)
			}
			text2, isErr2, _ := callErr(cs[(i+1)%2], scriptCall{"read_file", map[string]any{"path": "/x"}})
			if !isErr2 || !strings.Contains(text2, "4000 bytes") {
				t.Fatalf("the other replica, past the limit: %q %v", text2, isErr2)
			}
			return
		}
	}
	t.Fatal("40 calls never reached a 4000-byte limit")
}

// TestRedisRestart: with AOF a restarted Redis keeps the session (the
// revealed tool still runs, on either replica); without persistence the
// session is lost and its calls fail closed with a message on the
// replica that held it and, once it said so, on the others; a replica
// that never held it starts it anew, where the revealed tool is not
// available: never a widened session.
func TestRedisRestart(t *testing.T) {
	for _, aof := range []bool{true, false} {
		t.Run(fmt.Sprintf("aof=%v", aof), func(t *testing.T) {
			srv := redistest.Start(t, aof)
			st := redisStore(t, srv, sessionstore.Options{})
			a, b := newReplica(t, st, nil), newReplica(t, st, nil)
			alice := gateway.Principal{Name: "alice"}
			ca, cb := connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)
			if _, _, err := callErr(ca, script(0)); err != nil {
				t.Fatal(err)
			}
			if _, isErr, err := callErr(cb, script(1)); err != nil || isErr {
				t.Fatalf("the revealed tool on the other replica: %v %v", isErr, err)
			}
			srv.Restart(t)
			deadline := time.Now().Add(5 * time.Second)
			var text string
			var isErr bool
			for {
				var err error
				text, isErr, err = callErr(ca, script(1))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(text, "cannot be reached") || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if aof {
				if isErr {
					t.Fatalf("after a restart with AOF: %q", text)
				}
				return
			}
			if !isErr || !strings.Contains(text, "no longer in the gateway's session store") {
				t.Fatalf("after a restart without persistence, the replica that held it: %q", text)
			}
			if text, isErr, _ := callErr(cb, script(1)); !isErr || !strings.Contains(text, "no longer in the gateway's session store") {
				t.Fatalf("after a restart without persistence, the other replica: %q", text)
			}
			c := newReplica(t, st, nil)
			fresh := connect(t, c.g, gateway.Principal{Name: "alice"}, nil)
			if _, _, err := callErr(fresh, scriptCall{"read_file", map[string]any{"path": "/x"}}); err != nil {
				t.Fatal(err)
			}
			_ = c
		})
	}
}

// TestIdleSessionExpires: a session idle past --session-ttl is gone: its
// next call starts an empty session (the tool its search revealed is not
// available), on the memory store as on Redis.
func TestIdleSessionExpires(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			ttl := func(c *gateway.Config) { c.SessionTTL = 300 * time.Millisecond }
			var r *replica
			if store == "memory" {
				r = newReplica(t, nil, ttl)
			} else {
				srv := redistest.Start(t, false)
				r = newReplica(t, redisStore(t, srv, sessionstore.Options{TTL: 300 * time.Millisecond}), ttl)
			}
			cs := connect(t, r.g, gateway.Principal{Name: "alice"}, nil)
			if _, _, err := callErr(cs, script(0)); err != nil {
				t.Fatal(err)
			}
			if _, isErr, _ := callErr(cs, script(1)); isErr {
				t.Fatal("the revealed tool, at once, was refused")
			}
			time.Sleep(500 * time.Millisecond)
			text, isErr, err := callErr(cs, script(1))
			if err != nil || !isErr || !strings.Contains(text, "not available") {
				t.Fatalf("the revealed tool after the TTL: %q %v %v", text, isErr, err)
			}
		})
	}
}

// alternate sends each request to the next of its servers in turn, as
// HAProxy's round robin does.
type alternate struct {
	mu    sync.Mutex
	hosts []string
	next  int
	token string
	// answers are the requests that carried an answer to an
	// input-required result (their headers and bodies).
	answers []recorded
}

type recorded struct {
	header http.Header
	body   []byte
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	host := a.hosts[a.next%len(a.hosts)]
	a.next++
	a.mu.Unlock()
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"requestState"`)) {
			a.mu.Lock()
			a.answers = append(a.answers, recorded{r.Header.Clone(), body})
			a.mu.Unlock()
		}
	}
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = host, host
	r.Header.Set("Authorization", "Bearer "+a.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestApprovalAcrossReplicas: on 2026-07-28 a call needing approval is
// answered input-required by one replica and its retry, carrying the
// person's accept, reaches the other: the call runs once there. The same
// answer sent again, to either replica, runs nothing: the approval was
// used. On a Redis server and on a cluster.
func TestApprovalAcrossReplicas(t *testing.T) {
	sharedStores(t, sessionstore.Options{}, testApprovalAcrossReplicas)
}

func testApprovalAcrossReplicas(t *testing.T, st sessionstore.Store) {
	principals := func(c *gateway.Config) {
		c.Principals = gateway.NewPrincipals(map[string]gateway.Principal{aliceToken: {Name: "alice"}})
	}
	a, b := newReplica(t, st, principals), newReplica(t, st, principals)
	var hosts []string
	for _, r := range []*replica{a, b} {
		hs := httptest.NewServer(r.g.Handler())
		t.Cleanup(hs.Close)
		hosts = append(hosts, strings.TrimPrefix(hs.URL, "http://"))
	}
	rr := &alternate{hosts: hosts, token: aliceToken}
	var asked atomic.Int64
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + hosts[0] + "/mcp", HTTPClient: &http.Client{Transport: rr}, MaxRetries: -1}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rr.mu.Lock()
	rr.next = 0 // the call on a, its retry on b
	rr.mu.Unlock()
	text, isErr, err := callErr(cs, scriptCall{"deploy", map[string]any{"env": "prod"}})
	if err != nil || isErr {
		t.Fatalf("the approved deploy: %q %v %v", text, isErr, err)
	}
	if asked.Load() != 1 || a.f.calls.Load() != 0 || b.f.calls.Load() != 1 {
		t.Fatalf("asked %d, ran on a %d and on b %d; want 1, 0, 1", asked.Load(), a.f.calls.Load(), b.f.calls.Load())
	}
	// The accept sent again, to each replica: refused, nothing run.
	if len(rr.answers) != 1 {
		t.Fatalf("%d answers to an input-required result sent, want 1", len(rr.answers))
	}
	for _, host := range hosts {
		req, _ := http.NewRequest(http.MethodPost, "http://"+host+"/mcp", bytes.NewReader(rr.answers[0].body))
		req.Header = rr.answers[0].header.Clone()
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(body, []byte("no call waiting for approval")) {
			t.Fatalf("the accept sent again to %s: %s", host, body)
		}
	}
	if a.f.calls.Load()+b.f.calls.Load() != 1 {
		t.Fatalf("the accept sent again ran the call: %d runs", a.f.calls.Load()+b.f.calls.Load())
	}
	history, _ := a.g.History(a.g.SessionIDs()[0])
	if n := len(storedCalls(t, history)); n != 1 {
		t.Fatalf("%d calls stored, want 1", n)
	}
	// b decided the waiting call again (the approval needs its whole
	// decision), and replayed nothing.
	for name, want := range map[string]int{"policycheck_gateway_calls_decided_again_total": 1, "policycheck_gateway_calls_replayed_total": 0} {
		if got := metric(t, "http://"+hosts[1], name); got != want {
			t.Errorf("b's %s: %d, want %d", name, got, want)
		}
	}
}

// leaseless is a replica whose lease has always run out: it stopped
// (SIGKILL, SIGSTOP) while its call ran, as far as the others can tell.
type leaseless struct{ sessionstore.Store }

func (leaseless) Lock(context.Context, string) (func(), error) { return func() {}, nil }

// TestCallOfAStoppedReplicaIsAnsweredAsLost: a replica stops while its
// call runs at the upstream (the call is in the store, its answer never
// comes): the session's next call, on another replica, answers it as
// failed (whether it ran is not known: not charged) and goes on; what
// the stopped replica writes when it comes back is refused.
func TestCallOfAStoppedReplicaIsAnsweredAsLost(t *testing.T) {
	srv := redistest.Start(t, false)
	st := redisStore(t, srv, sessionstore.Options{})
	a, b := newReplica(t, leaseless{st}, nil), newReplica(t, st, nil)
	started, release := make(chan struct{}), make(chan struct{})
	a.f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			close(started)
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
		})
	alice := gateway.Principal{Name: "alice"}
	ca, cb := connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)
	done := make(chan string)
	go func() {
		text, _, _ := callErr(ca, scriptCall{"read_file", map[string]any{"path": "/slow"}})
		done <- text
	}()
	<-started
	if text, isErr, err := callErr(cb, scriptCall{"read_file", map[string]any{"path": "/x"}}); err != nil || isErr {
		t.Fatalf("the next call, on the other replica: %q %v %v", text, isErr, err)
	}
	close(release)
	<-done
	history, _ := b.g.History(b.g.SessionIDs()[0])
	var msgs []struct {
		Kind  string `json:"kind"`
		Parts []struct {
			ID      string `json:"tool_call_id"`
			Outcome string `json:"outcome"`
			Content any    `json:"content"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(history, &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[1].Parts[0].ID != "gw_1" || msgs[1].Parts[0].Outcome != "failed" ||
		!strings.Contains(fmt.Sprint(msgs[1].Parts[0].Content), "may or may not have run") || msgs[2].Parts[0].ID != "gw_2" {
		t.Fatalf("the history: %s", history)
	}
}

// TestReplicaDoesNotDecideAnotherReplicasCall: a replica gives its run a
// call another replica decided with the verdicts that replica's decision
// gave (engine.Run.Replay), evaluating no policy for it: calls spread
// over two replicas cost one evaluation each, as on one replica (each
// replica's decision memo counts the evaluations it looks up). Deciding
// the other's call again, as replicas did, cost two.
func TestReplicaDoesNotDecideAnotherReplicasCall(t *testing.T) {
	const calls = 40
	evaluations := func(gs ...*gateway.Gateway) int64 {
		n := int64(0)
		for _, g := range gs {
			hits, misses, _ := g.Engine().DecisionCacheStats()
			n += hits + misses
		}
		return n
	}
	alice := gateway.Principal{Name: "alice"}
	one := newReplica(t, nil, nil)
	c1 := connect(t, one.g, alice, nil)
	st := sessionstore.NewMemory(sessionstore.Options{})
	a, b := newReplica(t, st, nil), newReplica(t, st, nil)
	cs := [2]*mcp.ClientSession{connect(t, a.g, alice, nil), connect(t, b.g, alice, nil)}
	before1, before2 := evaluations(one.g), evaluations(a.g, b.g)
	for i := range calls {
		c := scriptCall{"read_file", map[string]any{"path": "/x"}}
		if _, isErr, err := callErr(c1, c); err != nil || isErr {
			t.Fatalf("one replica, call %d: %v %v", i, err, isErr)
		}
		if _, isErr, err := callErr(cs[i%2], c); err != nil || isErr {
			t.Fatalf("two replicas, call %d: %v %v", i, err, isErr)
		}
	}
	alone, spread := evaluations(one.g)-before1, evaluations(a.g, b.g)-before2
	t.Logf("%d calls: %d evaluations on one replica, %d over two", calls, alone, spread)
	if spread > alone {
		t.Fatalf("%d calls over two replicas took %d evaluations, %d on one", calls, spread, alone)
	}
	// Each call but the first gave its replica's run the other's call:
	// the metrics say each was replayed, none decided again.
	sa, sb := httptest.NewServer(a.g.Handler()), httptest.NewServer(b.g.Handler())
	defer sa.Close()
	defer sb.Close()
	for name, want := range map[string]int{"policycheck_gateway_calls_replayed_total": calls - 1, "policycheck_gateway_calls_decided_again_total": 0} {
		if got := metric(t, sa.URL, name) + metric(t, sb.URL, name); got != want {
			t.Errorf("%s: %d over the two replicas, want %d", name, got, want)
		}
	}
}
