package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// lostText is in what a lost session's calls answer.
const lostText = "no longer in the gateway's session store"

// TestLostSessionEndsAfterTTL: a session marked lost (the store lost
// its history) ends --session-ttl after it was marked, however often its
// client calls meanwhile (a refused call does not renew it); the
// principal's next request then starts a fresh session. Its clients have
// no other way out: a stdio client, a 2026-07-28 client without a _meta
// handle (its session is its principal), and a replica that learnt of
// the loss from the store (memory; Redis restarted without persistence).
func TestLostSessionEndsAfterTTL(t *testing.T) {
	const ttl = time.Second
	short := func(c *gateway.Config) { c.SessionTTL = ttl }
	// forget deletes g's session from st, as a store that lost it.
	forget := func(t *testing.T, g *gateway.Gateway, st sessionstore.Store) func() {
		return func() {
			ids := g.SessionIDs()
			if len(ids) != 1 {
				t.Fatalf("sessions %v, want one", ids)
			}
			key, ok, err := st.Lookup(context.Background(), ids[0])
			if err != nil || !ok {
				t.Fatalf("the session's key: %v %v", ok, err)
			}
			if err := st.Delete(context.Background(), key); err != nil {
				t.Fatal(err)
			}
		}
	}
	// single is one gateway on a memory store the test holds.
	single := func(t *testing.T, extra func(*gateway.Config)) (*sessionstore.Memory, func(*gateway.Config)) {
		st := sessionstore.NewMemory(sessionstore.Options{TTL: ttl})
		return st, func(c *gateway.Config) { short(c); gateway.UseStore(c, st); extra(c) }
	}
	// replicas are two gateways on st, a client of alice on each, both
	// of which called before the loss.
	replicas := func(t *testing.T, st sessionstore.Store) (a, b *gateway.Gateway, ca, cb *mcp.ClientSession) {
		shared := func(c *gateway.Config) { short(c); gateway.UseStore(c, st) }
		a, b = newTestGateway(t, newFakeUpstream(), shared), newTestGateway(t, newFakeUpstream(), shared)
		alice := gateway.Principal{Name: "alice"}
		ca, cb = connect(t, a, alice, nil), connect(t, b, alice, nil)
		return a, b, ca, cb
	}
	for _, tc := range []struct {
		name string
		// open returns the client whose replica first finds the session
		// lost, the client whose calls after it are checked (the same or
		// another replica's), that replica, and what loses the session.
		open func(t *testing.T) (mark, after *mcp.ClientSession, g *gateway.Gateway, lose func())
	}{
		{"stdio", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession, *gateway.Gateway, func()) {
			st, cfg := single(t, func(*gateway.Config) {})
			g := newTestGateway(t, newFakeUpstream(), cfg)
			cs := connect(t, g, gateway.Principal{Name: "stdio"}, nil)
			return cs, cs, g, forget(t, g, st)
		}},
		{"2026-07-28 without a handle", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession, *gateway.Gateway, func()) {
			st, cfg := single(t, func(*gateway.Config) {})
			g, srv, _ := httpGatewayWith(t, cfg)
			cs := httpClient(t, srv.URL, aliceToken, "2026-07-28")
			return cs, cs, g, forget(t, g, st)
		}},
		{"another replica", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession, *gateway.Gateway, func()) {
			st := sessionstore.NewMemory(sessionstore.Options{TTL: ttl})
			a, b, ca, cb := replicas(t, st)
			return ca, cb, b, forget(t, a, st)
		}},
		{"another replica, redis", func(t *testing.T) (*mcp.ClientSession, *mcp.ClientSession, *gateway.Gateway, func()) {
			srv := redistest.Start(t, false)
			_, b, ca, cb := replicas(t, redisStore(t, srv, sessionstore.Options{TTL: ttl}))
			return ca, cb, b, func() { srv.Restart(t) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark, after, g, lose := tc.open(t)
			for _, cs := range []*mcp.ClientSession{after, mark} {
				if msg, isErr := call(t, cs, "read_file", map[string]any{"path": "/a"}); isErr {
					t.Fatalf("a call before the loss: %q", msg)
				}
			}
			old := g.SessionIDs()
			lose()
			// The first call after the loss finds it lost (the client of
			// a restarted Redis may first find it unreachable).
			marked := time.Now()
			until(t, "the session found lost", func() bool {
				msg, isErr := call(t, mark, "read_file", map[string]any{"path": "/a"})
				if !isErr || !strings.Contains(msg, lostText) && !strings.Contains(msg, "cannot be reached") {
					t.Fatalf("the first call after the loss: %q", msg)
				}
				return strings.Contains(msg, lostText)
			})
			// Called every 20ms, far within the TTL: refused until the
			// TTL after the loss was marked, then served by a fresh
			// session.
			refused := refusedUntilServed(t, after, func(msg string) bool { return strings.Contains(msg, lostText) })
			if took := time.Since(marked); took < ttl {
				t.Fatalf("served %v after the loss, within the TTL (%v)", took, ttl)
			}
			if refused == 0 {
				t.Fatal("no call was refused after the loss")
			}
			// The replica that found it lost joins the fresh session.
			if msg, isErr := call(t, mark, "read_file", map[string]any{"path": "/b"}); isErr {
				t.Fatalf("the marking client once the fresh session began: %q", msg)
			}
			// Fresh: another id, a listing that is not empty.
			if now := g.SessionIDs(); len(now) != 1 || len(old) != 1 || now[0] == old[0] {
				t.Fatalf("sessions %v after the loss, %v before: want one fresh", now, old)
			}
			if got := toolNames(t, after); len(got) == 0 {
				t.Fatal("the fresh session lists nothing")
			}
		})
	}
}
