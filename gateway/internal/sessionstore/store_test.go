package sessionstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// stores runs f on a Memory store and on a Redis store (a real
// redis-server; skipped outside CI without one).
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
// the store's own dial; a value that is neither memory nor a Redis URL
// is refused.
func TestOpenRefusesWhatNamesNoServer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ spec, want string }{
		{"redis://", "names no Redis host"},
		{"redis:///0", "names no Redis host"},
		{"redis://:hunter2@/0", "names no Redis host"},
		{"rediss://:6379/0", "names no Redis host"},
		{"redis://127.0.0.1:1/0", "127.0.0.1:1: the Redis server does not answer"},
		{"redis://%zz", "not a URL"},
		{"file:///tmp/x", "want memory or redis://HOST:PORT/DB"},
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
		for {
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
			if id, err := st.Open(ctx, "k", "id2"); err != nil || id != "id1" {
				t.Fatalf("open of the lost session: %q %v", id, err)
			}
		}
		if _, ok, _ := st.Lookup(ctx, "id1"); ok {
			t.Fatal("the ended session's id is still found")
		}
		if id, _ := st.Open(ctx, "k", "id3"); id != "id3" {
			t.Fatalf("the key's next Open gave id %q, want a new session's", id)
		}
	})
}
