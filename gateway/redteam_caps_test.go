package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// storeRecords counts what a session store holds: the memory store's
// sessions, or every key of a Redis server (a session's meta hash, its
// history, its id's index, leases and claims).
type storeRecords func(t *testing.T) int

// testStores is a fresh memory store and a fresh store on its own Redis
// server, each with the count of what it holds.
func testStores(t *testing.T) map[string]func(t *testing.T) (sessionstore.Store, storeRecords) {
	return map[string]func(t *testing.T) (sessionstore.Store, storeRecords){
		"memory": func(*testing.T) (sessionstore.Store, storeRecords) {
			m := sessionstore.NewMemory(sessionstore.Options{})
			return m, func(*testing.T) int { return m.Sessions() }
		},
		"redis": func(t *testing.T) (sessionstore.Store, storeRecords) {
			srv := redistest.Start(t, false)
			return redisStore(t, srv, sessionstore.Options{}), func(t *testing.T) int {
				n, err := redistest.Do(srv.Addr, "DBSIZE")
				if err != nil {
					t.Fatal(err)
				}
				return int(n.(int64))
			}
		},
	}
}

// TestRedteamRefusedSessionsLeaveNoRecord: a new session's handle was
// opened in the session store (its public id recorded, kept for
// --session-ttl) before the caps were checked, so every request the caps
// refused left a record behind: a principal refused by a full table, or
// by its own cap with every session in a call, added one record per
// request, each with a handle of its choosing (_meta
// policycheck/session), memory growing with requests, not with the
// sessions the caps admit (20 refused requests: 20 sessions more in the
// memory store, 40 keys more in Redis). Now the caps admit a session
// before anything is written, and a refused request writes nothing.
func TestRedteamRefusedSessionsLeaveNoRecord(t *testing.T) {
	const refused = 20
	for _, tc := range []struct {
		note string
		cfg  func(c *gateway.Config)
		// hold brings the caps to where alice's next new session is
		// refused, and returns what ends the hold.
		hold func(t *testing.T, g *gateway.Gateway, f *fakeUpstream) func()
		want string
	}{
		{
			note: "the table full",
			cfg:  func(c *gateway.Config) { c.MaxSessions, c.MaxSessionsPerPrincipal = 2, 2 },
			hold: func(t *testing.T, g *gateway.Gateway, _ *fakeUpstream) func() {
				bob := connect(t, g, gateway.Principal{Name: "bob"}, nil)
				for _, h := range []string{"b0", "b1"} {
					if msg, isErr := callMeta(t, bob, h, "read_file", map[string]any{"path": "/a"}); isErr {
						t.Fatalf("bob's session %s: %q", h, msg)
					}
				}
				return func() {}
			},
			want: "as many sessions as it may",
		},
		{
			note: "the principal's cap full, every session in a call",
			cfg:  func(c *gateway.Config) { c.MaxSessionsPerPrincipal = 1 },
			hold: func(t *testing.T, g *gateway.Gateway, f *fakeUpstream) func() {
				release, started := make(chan struct{}), make(chan struct{}, 1)
				f.srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)},
					func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						started <- struct{}{}
						<-release
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
					})
				alice := connect(t, g, gateway.Principal{Name: "alice"}, nil)
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/a"},
						Meta: mcp.Meta{"policycheck/session": "busy"}})
				}()
				<-started
				return func() { close(release); <-done }
			},
			want: "every one of them is in a call",
		},
	} {
		for name, mk := range testStores(t) {
			t.Run(tc.note+"/"+name, func(t *testing.T) {
				st, records := mk(t)
				f := newFakeUpstream()
				g := newTestGateway(t, f, func(c *gateway.Config) {
					gateway.UseStore(c, st)
					c.Logger = nil
					tc.cfg(c)
				})
				end := tc.hold(t, g, f)
				defer end()
				alice := connect(t, g, gateway.Principal{Name: "alice"}, nil)
				before := records(t)
				for i := range refused {
					_, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools",
						Arguments: map[string]any{"queries": []string{"write"}}, Meta: mcp.Meta{"policycheck/session": fmt.Sprintf("x%d", i)}})
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("alice's new session %d: %v, want refused (%s)", i, err, tc.want)
					}
				}
				if after := records(t); after != before {
					t.Errorf("the store holds %d records after %d refused requests, %d before: refused sessions were written", after, refused, before)
				}
			})
		}
	}
}
