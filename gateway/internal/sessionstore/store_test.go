package sessionstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// shared is the Redis Cluster this package's tests share.
var shared redistest.SharedCluster

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

// clusterStore opens a store on the shared cluster, empty.
func clusterStore(t *testing.T, o sessionstore.Options) (*sessionstore.Redis, *redistest.Cluster) {
	t.Helper()
	c := shared.Get(t)
	st, err := sessionstore.NewRedisCluster(context.Background(), c.URL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, c
}

// stores runs f on a Memory store, on a Redis store (a real
// redis-server) and on a Redis Cluster store (three real cluster
// nodes); the last two are skipped outside CI without redis-server.
func stores(t *testing.T, o sessionstore.Options, f func(t *testing.T, st sessionstore.Store)) {
	t.Run("memory", func(t *testing.T) { f(t, sessionstore.NewMemory(o)) })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t, false)
		st, err := sessionstore.NewRedis(context.Background(), srv.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		f(t, st)
	})
	t.Run("cluster", func(t *testing.T) {
		st, _ := clusterStore(t, o)
		f(t, st)
	})
}

func entry(s string) sessionstore.Entry { return sessionstore.Entry{Note: "q", Msg: []byte(s)} }

// TestAppendIsChecked: an append carries the length its writer saw; one
// made on a shorter view is refused, nothing written.
func TestAppendIsChecked(t *testing.T) {
	ctx := context.Background()
	stores(t, sessionstore.Options{}, func(t *testing.T, st sessionstore.Store) {
		if _, err := st.Open(ctx, "k", "id1"); err != nil {
			t.Fatal(err)
		}
		if id, _ := st.Open(ctx, "k", "id2"); id != "id1" {
			t.Fatalf("a second Open gave id %q, want the first's", id)
		}
		if err := st.Append(ctx, "k", 0, entry(`"a"`), entry(`"b"`)); err != nil {
			t.Fatal(err)
		}
		if err := st.Append(ctx, "k", 1, entry(`"x"`)); !errors.Is(err, sessionstore.ErrConflict) {
			t.Fatalf("append at a stale length: %v, want ErrConflict", err)
		}
		es, state, err := st.Load(ctx, "k", 1)
		if err != nil || state.Len != 2 || len(es) != 1 || string(es[0].Msg) != `"b"` || es[0].Note != "q" {
			t.Fatalf("load from 1: %v %+v %v", es, state, err)
		}
		if key, ok, _ := st.Lookup(ctx, "id1"); !ok || key != "k" {
			t.Fatalf("lookup: %q %v", key, ok)
		}
	})
}

// TestTwoWritersNeverLoseOrReorder: two writers append to one history
// at once, each loading what it has not seen and appending with the
// length it saw (retrying on a conflict): every message of both is
// there once, each writer's in its order.
func TestTwoWritersNeverLoseOrReorder(t *testing.T) {
	ctx := context.Background()
	stores(t, sessionstore.Options{}, func(t *testing.T, st sessionstore.Store) {
		const each = 200
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seen := 0
				for i := 0; i < each; {
					es, state, err := st.Load(ctx, "k", seen)
					if err != nil {
						t.Error(err)
						return
					}
					seen += len(es)
					if state.Len != seen {
						t.Errorf("loaded to %d, the store holds %d", seen, state.Len)
						return
					}
					err = st.Append(ctx, "k", seen, entry(fmt.Sprintf(`"w%d-%d"`, w, i)))
					if errors.Is(err, sessionstore.ErrConflict) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					seen++
					i++
				}
			}()
		}
		wg.Wait()
		es, _, err := st.Load(ctx, "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 2*each {
			t.Fatalf("%d entries, want %d", len(es), 2*each)
		}
		next := [2]int{}
		for _, e := range es {
			var w, i int
			if _, err := fmt.Sscanf(strings.Trim(string(e.Msg), `"`), "w%d-%d", &w, &i); err != nil {
				t.Fatal(err)
			}
			if i != next[w] {
				t.Fatalf("writer %d's message %d came where %d was due", w, i, next[w])
			}
			next[w]++
		}
	})
}

// TestSizeLimitRefusesAppends: an append past MaxBytes is refused with
// ErrTooLarge, nothing written.
func TestSizeLimitRefusesAppends(t *testing.T) {
	ctx := context.Background()
	stores(t, sessionstore.Options{MaxBytes: 10}, func(t *testing.T, st sessionstore.Store) {
		if err := st.Append(ctx, "k", 0, entry("12345678")); err != nil {
			t.Fatal(err)
		}
		if err := st.Append(ctx, "k", 1, entry("123")); !errors.Is(err, sessionstore.ErrTooLarge) {
			t.Fatalf("append past the limit: %v, want ErrTooLarge", err)
		}
		if _, state, _ := st.Load(ctx, "k", 0); state.Len != 1 {
			t.Fatalf("the refused append wrote: %d entries", state.Len)
		}
	})
}

// TestIdleSessionsExpire: a session idle past the TTL is gone.
func TestIdleSessionsExpire(t *testing.T) {
	ctx := context.Background()
	stores(t, sessionstore.Options{TTL: 300 * time.Millisecond}, func(t *testing.T, st sessionstore.Store) {
		if _, err := st.Open(ctx, "k", "id"); err != nil {
			t.Fatal(err)
		}
		if err := st.Append(ctx, "k", 0, entry("1")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
		if _, state, _ := st.Load(ctx, "k", 0); state.Len != 1 {
			t.Fatal("a session used within its TTL expired")
		}
		time.Sleep(450 * time.Millisecond)
		if _, state, _ := st.Load(ctx, "k", 0); state.Len != 0 {
			t.Fatalf("a session idle past its TTL holds %d entries", state.Len)
		}
	})
}

// TestClaimIsSingleUse: an approval is claimed once across every client
// of the store, however many try at once.
func TestClaimIsSingleUse(t *testing.T) {
	ctx := context.Background()
	stores(t, sessionstore.Options{}, func(t *testing.T, st sessionstore.Store) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := st.Claim(ctx, "k", "approval gw_1 sha256:abc")
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d claims of one approval succeeded, want 1", won)
		}
		if ok, _ := st.Claim(ctx, "other", "approval gw_1 sha256:abc"); !ok {
			t.Fatal("another session's claim of the same id was refused")
		}
	})
}

// TestLockExcludes: a session's lease is held by one holder at a time;
// one that stops renewing (a stalled or killed replica) loses it after
// the lease.
func TestLockExcludes(t *testing.T) {
	ctx := context.Background()
	stores(t, sessionstore.Options{Lease: 300 * time.Millisecond}, func(t *testing.T, st sessionstore.Store) {
		var inside, most int
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 10 {
					release, err := st.Lock(ctx, "k")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					inside++
					most = max(most, inside)
					order = append(order, strconv.Itoa(w)+"-"+strconv.Itoa(i))
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					inside--
					mu.Unlock()
					release()
				}
			}()
		}
		wg.Wait()
		if most != 1 || len(order) != 40 {
			t.Fatalf("%d holders at once (want 1), %d turns", most, len(order))
		}
	})
	t.Run("redis lease ends", func(t *testing.T) {
		srv := redistest.Start(t, false)
		o := sessionstore.Options{Lease: 300 * time.Millisecond, LockWait: 5 * time.Second}
		a, err := sessionstore.NewRedis(ctx, srv.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sessionstore.NewRedis(ctx, srv.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Lock(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		// a's process stops: its connection closes, its renewals stop.
		_ = a.Close()
		start := time.Now()
		release, err := b.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		release()
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("the lease of a stopped holder lasted %v", took)
		}
		_ = b.Close()
	})
}

// TestOpenRefusesWhatNamesNoServer: a --session-store URL without a host
// is refused (go-redis would read it as 127.0.0.1:6379), without
// repeating its password; a server that does not answer is said once by
// the store's own dial; a cluster's URL naming a database other than 0
// or an option other than addr is refused; a value that is neither
// memory nor a Redis URL is refused.
func TestOpenRefusesWhatNamesNoServer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ spec, want string }{
		{"redis://", "names no Redis host"},
		{"redis:///0", "names no Redis host"},
		{"redis://:hunter2@/0", "names no Redis host"},
		{"rediss://:6379/0", "names no Redis host"},
		{"redis://127.0.0.1:1/0", "127.0.0.1:1: the Redis server does not answer"},
		{"redis://%zz", "not a URL"},
		{"redis+cluster://", "names no Redis host"},
		{"rediss+cluster://u:hunter2@:7000", "names no Redis host"},
		{"redis+cluster://u:hunter2@127.0.0.1:1/3", `names database "3": a Redis Cluster has database 0 alone`},
		{"redis+cluster://u:hunter2@127.0.0.1:1?pool_size=9", `unknown option "pool_size"`},
		{"redis+cluster://u:hunter2@127.0.0.1:1?addr=nohost", "unable to parse addr param: nohost"},
		{"redis+cluster://u:hunter2@127.0.0.1:1/0", "127.0.0.1:1: the Redis server does not answer"},
		{"redis+cluster://127.0.0.1:2?addr=127.0.0.1:1", "127.0.0.1:2: the Redis server does not answer"},
		{"redis+cluster://%zz", "not a URL"},
		{"file:///tmp/x", "want memory, redis://HOST:PORT/DB or redis+cluster://HOST:PORT"},
		{"redis-cluster://u:hunter2@127.0.0.1:1", "want memory, redis://HOST:PORT/DB or redis+cluster://HOST:PORT"},
	} {
		_, err := sessionstore.Open(ctx, tc.spec, sessionstore.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.spec, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the password: %v", tc.spec, err)
		}
	}
}

// TestDeleteDropsOneSession: Delete drops a session's history and id
// (Lookup finds nothing; the key's next Open is a new, empty session)
// and no other session; a claim made before stays used.
func TestDeleteDropsOneSession(t *testing.T) {
	ctx := context.Background()
	stores(t, sessionstore.Options{}, func(t *testing.T, st sessionstore.Store) {
		for _, k := range []string{"alice\x00s", "bob\x00s"} {
			if _, err := st.Open(ctx, k, "id-"+k[:3]); err != nil {
				t.Fatal(err)
			}
			if err := st.Append(ctx, k, 0, entry(`"a"`), entry(`"b"`)); err != nil {
				t.Fatal(err)
			}
		}
		if ok, _ := st.Claim(ctx, "alice\x00s", "approval"); !ok {
			t.Fatal("claim refused")
		}
		if err := st.Delete(ctx, "alice\x00s"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := st.Lookup(ctx, "id-ali"); ok {
			t.Fatal("a deleted session's id is still found")
		}
		if _, state, _ := st.Load(ctx, "alice\x00s", 0); state.Len != 0 || state.Lost {
			t.Fatalf("a deleted session loads %+v", state)
		}
		if _, state, _ := st.Load(ctx, "bob\x00s", 0); state.Len != 2 {
			t.Fatalf("another session lost entries: %+v", state)
		}
		if key, ok, _ := st.Lookup(ctx, "id-bob"); !ok || key != "bob\x00s" {
			t.Fatal("another session's id is gone")
		}
		if id, _ := st.Open(ctx, "alice\x00s", "id-new"); id != "id-new" {
			t.Fatalf("the key's next Open gave id %q, want a new session's", id)
		}
		if ok, _ := st.Claim(ctx, "alice\x00s", "approval"); ok {
			t.Fatal("an approval claimed before the delete could be claimed again")
		}
		if err := st.Delete(ctx, "nobody\x00s"); err != nil {
			t.Fatalf("deleting an absent session: %v", err)
		}
	})
}

// TestLostEndsTTLAfterItsMark: a session marked lost ends the TTL after
// its first mark however often it is loaded or opened meanwhile (neither
// renews it; a second mark keeps the first's time); then its key starts
// an empty session, under a new id.
func TestLostEndsTTLAfterItsMark(t *testing.T) {
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	stores(t, sessionstore.Options{TTL: ttl}, func(t *testing.T, st sessionstore.Store) {
		if _, err := st.Open(ctx, "k", "id1"); err != nil {
			t.Fatal(err)
		}
		if err := st.Append(ctx, "k", 0, entry(`"a"`), entry(`"b"`)); err != nil {
			t.Fatal(err)
		}
		before := time.Now().Truncate(time.Millisecond)
		at, err := st.MarkLost(ctx, "k")
		if err != nil || at.Before(before) || time.Since(at) > time.Second {
			t.Fatalf("marked lost at %v (%v), want about now", at, err)
		}
		if again, err := st.MarkLost(ctx, "k"); err != nil || !again.Equal(at) {
			t.Fatalf("a second mark: %v (%v), want the first's %v", again, err, at)
		}
		next := "id3" // the id the key's next session is opened with
		for next == "id3" {
			time.Sleep(20 * time.Millisecond)
			_, state, err := st.Load(ctx, "k", 0)
			if err != nil {
				t.Fatal(err)
			}
			if !state.Lost {
				if since := time.Since(at); since < ttl {
					t.Fatalf("no longer lost %v after the mark, within the TTL", since)
				}
				if state.Len != 0 {
					t.Fatalf("the ended session loads %+v", state)
				}
				break
			}
			if !state.LostAt.Equal(at) {
				t.Fatalf("lost at %v, marked at %v", state.LostAt, at)
			}
			if time.Since(at) > ttl+2*time.Second {
				t.Fatalf("still lost %v after the mark", time.Since(at))
			}
			id, err := st.Open(ctx, "k", "id2")
			switch {
			case err != nil:
				t.Fatal(err)
			case id == "id2" && time.Since(at) >= ttl:
				// The session ended between the load and the open: the
				// open began the key's next session.
				next = "id2"
			case id != "id1":
				t.Fatalf("open of the lost session %v after the mark: %q", time.Since(at), id)
			}
		}
		if _, ok, _ := st.Lookup(ctx, "id1"); ok {
			t.Fatal("the ended session's id is still found")
		}
		if id, _ := st.Open(ctx, "k", "id3"); id != next {
			t.Fatalf("the key's next Open gave id %q, want the new session's %q", id, next)
		}
	})
}

// TestOpenChecksWhatAnswers: a cluster's URL naming a server that is not
// a cluster node, or a node whose cluster is not ready, is refused,
// naming that address; a single server's URL naming a cluster node is
// refused (it would answer MOVED for most sessions); a cluster's URL
// whose seeds all answer opens the store, with or without /0, and so does
// one with a seed that does not answer beside one that does (a warning
// names it). A URL none of whose seeds answers is refused
// (TestOpenRefusesWhatNamesNoServer).
func TestOpenChecksWhatAnswers(t *testing.T) {
	ctx := context.Background()
	c := shared.Get(t)
	lone := redistest.Start(t, false)
	fresh := redistest.StartNode(t)
	for _, tc := range []struct{ note, spec, want string }{
		{"a single server as a cluster", "redis+cluster://" + lone.Addr, lone.Addr + ": not a node of a Redis Cluster"},
		{"a single server among the seeds", c.URL + "&addr=" + lone.Addr, lone.Addr + ": not a node of a Redis Cluster"},
		{"a node of no cluster", "redis+cluster://" + fresh.Addr, fresh.Addr + ": the Redis Cluster is not ready (cluster_state:fail)"},
		{"a cluster node as a single server", c.Nodes[1].URL, c.Nodes[1].Addr + ": the Redis server is a node of a Redis Cluster: name the cluster as redis+cluster://"},
	} {
		st, err := sessionstore.Open(ctx, tc.spec, sessionstore.Options{})
		if err == nil {
			_ = st.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.note, err, tc.want)
		}
	}
	for _, spec := range []string{c.URL, "redis+cluster://" + c.Nodes[2].Addr + "/0"} {
		st, err := sessionstore.Open(ctx, spec, sessionstore.Options{})
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if _, err := st.Open(ctx, "k", "id"); err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		_ = st.Close()
	}
	// A seed that does not answer (a node down when the gateway starts)
	// while another does: the store opens, and says which seed it could
	// not reach.
	var warned []string
	warn := func(msg string) { warned = append(warned, msg) }
	st, err := sessionstore.Open(ctx, "redis+cluster://127.0.0.1:1?addr="+c.Nodes[0].Addr, sessionstore.Options{Warn: warn})
	if err != nil {
		t.Fatalf("a seed down, another up: %v", err)
	}
	if _, err := st.Open(ctx, "k2", "id2"); err != nil {
		t.Fatalf("a seed down, another up: %v", err)
	}
	_ = st.Close()
	if len(warned) != 1 || !strings.Contains(warned[0], "127.0.0.1:1: the Redis server does not answer") {
		t.Errorf("a seed down: warned %q, want the seed named once", warned)
	}
}

// TestSessionAcrossClusterNodes: a session whose keys are on one node of
// a cluster and whose id's index is on another (as CLUSTER KEYSLOT and
// CLUSTER NODES say) is served as on one server: opened, appended,
// loaded, looked up by its id, locked, claimed, marked lost and deleted.
// A script that touched the index beside the session's keys fails here
// (CROSSSLOT, or a key the node does not serve), as main's did.
func TestSessionAcrossClusterNodes(t *testing.T) {
	ctx := context.Background()
	st, c := clusterStore(t, sessionstore.Options{})
	const key = "alice\x00h1"
	list, meta, lease := sessionstore.SessionKeys(key)
	home := c.NodeOf(t, meta)
	for _, k := range []string{list, lease} {
		if n := c.NodeOf(t, k); n != home {
			t.Fatalf("the session's keys are on %s and %s", home, n)
		}
	}
	id := ""
	for i := 0; id == ""; i++ {
		if cand := fmt.Sprintf("gs_%d", i); c.NodeOf(t, sessionstore.IDKey(cand)) != home {
			id = cand
		}
	}
	away := c.NodeOf(t, sessionstore.IDKey(id))
	t.Logf("the session's keys on %s, its id's index on %s", home, away)

	if got, err := st.Open(ctx, key, id); err != nil || got != id {
		t.Fatalf("open: %q %v", got, err)
	}
	if got, err := redistest.Do(away, "GET", sessionstore.IDKey(id)); err != nil || got != key {
		t.Fatalf("the id's index on %s: %q %v, want the session's key", away, got, err)
	}
	if got, err := st.Open(ctx, key, "gs_other"); err != nil || got != id {
		t.Fatalf("a second open: %q %v, want %q", got, err, id)
	}
	if err := st.Append(ctx, key, 0, entry(`"a"`), entry(`"b"`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, key, 1, entry(`"x"`)); !errors.Is(err, sessionstore.ErrConflict) {
		t.Fatalf("append at a stale length: %v", err)
	}
	es, state, err := st.Load(ctx, key, 1)
	if err != nil || state.Len != 2 || len(es) != 1 || string(es[0].Msg) != `"b"` {
		t.Fatalf("load: %v %+v %v", es, state, err)
	}
	if got, ok, err := st.Lookup(ctx, id); err != nil || !ok || got != key {
		t.Fatalf("lookup: %q %v %v", got, ok, err)
	}
	release, err := st.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if ok, err := st.Claim(ctx, key, "approval"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := st.Claim(ctx, key, "approval"); err != nil || ok {
		t.Fatalf("a second claim: %v %v", ok, err)
	}
	at, err := st.MarkLost(ctx, key)
	if err != nil || time.Since(at) > time.Second {
		t.Fatalf("mark lost: %v %v", at, err)
	}
	if _, state, err := st.Load(ctx, key, 0); err != nil || !state.Lost || !state.LostAt.Equal(at) {
		t.Fatalf("load of the lost session: %+v %v", state, err)
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Lookup(ctx, id); err != nil || ok {
		t.Fatalf("lookup of the deleted session: %v %v", ok, err)
	}
	if got, err := redistest.Do(away, "EXISTS", sessionstore.IDKey(id)); err != nil || got != int64(0) {
		t.Fatalf("the deleted session's index on %s: %v %v", away, got, err)
	}
}

// TestLookupNeverNamesAnotherSession: an id's index left behind by its
// session (an Open that read the id before a Delete wrote it after, on
// a cluster where the two are separate commands) names the session's
// key, which a new session under another id has taken since: Lookup of
// the old id finds nothing, not the new session.
func TestLookupNeverNamesAnotherSession(t *testing.T) {
	ctx := context.Background()
	st, c := clusterStore(t, sessionstore.Options{})
	const key = "alice\x00h1"
	if _, err := st.Open(ctx, key, "gs_old"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	// The late write of the old index, as that Open makes it.
	addr := c.NodeOf(t, sessionstore.IDKey("gs_old"))
	if _, err := redistest.Do(addr, "SET", sessionstore.IDKey("gs_old"), key, "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Lookup(ctx, "gs_old"); err != nil || ok {
		t.Fatalf("the old id, its session deleted: found %v (%v)", ok, err)
	}
	if id, err := st.Open(ctx, key, "gs_new"); err != nil || id != "gs_new" {
		t.Fatalf("the key's next open: %q %v", id, err)
	}
	if got, ok, err := st.Lookup(ctx, "gs_old"); err != nil || ok {
		t.Fatalf("the old id names the key's new session: %q %v (%v)", got, ok, err)
	}
	if got, ok, err := st.Lookup(ctx, "gs_new"); err != nil || !ok || got != key {
		t.Fatalf("the new id: %q %v (%v)", got, ok, err)
	}
}

// TestMissingIndexIsWrittenAgain: an id's index gone missing while its
// session lives (its write failed after the session's script, on a
// cluster where the two are separate commands) makes Lookup answer not
// found, and the session's next Load writes it again.
func TestMissingIndexIsWrittenAgain(t *testing.T) {
	ctx := context.Background()
	st, c := clusterStore(t, sessionstore.Options{})
	const key = "alice\x00h1"
	if _, err := st.Open(ctx, key, "gs_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := redistest.Do(c.NodeOf(t, sessionstore.IDKey("gs_1")), "DEL", sessionstore.IDKey("gs_1")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Lookup(ctx, "gs_1"); err != nil || ok {
		t.Fatalf("lookup without the index: %v %v, want not found", ok, err)
	}
	if _, _, err := st.Load(ctx, key, 0); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := st.Lookup(ctx, "gs_1"); err != nil || !ok || got != key {
		t.Fatalf("lookup after a load: %q %v %v", got, ok, err)
	}
}
