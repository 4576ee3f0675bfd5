package sessionstore_test

import (
	"context"
	"testing"

	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// BenchmarkCall is what one gateway call asks of the store, one op: the
// lease taken, the history loaded from what the replica saw, the call
// and its answer appended, the lease given back; on the memory store,
// one Redis server and a three-node Redis Cluster.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	open := map[string]func(b *testing.B) sessionstore.Store{
		"memory": func(*testing.B) sessionstore.Store { return sessionstore.NewMemory(sessionstore.Options{}) },
		"redis": func(b *testing.B) sessionstore.Store {
			st, err := sessionstore.NewRedis(ctx, redistest.Start(b, false).URL, sessionstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
		"cluster": func(b *testing.B) sessionstore.Store {
			st, err := sessionstore.NewRedisCluster(ctx, shared.Get(b).URL, sessionstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	call, answer := entry(`{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"read_file"}]}`), entry(`{"kind":"request"}`)
	for _, name := range []string{"memory", "redis", "cluster"} {
		b.Run("store="+name, func(b *testing.B) {
			st := open[name](b)
			defer st.Close()
			if _, err := st.Open(ctx, "alice\x00h", "gs_1"); err != nil {
				b.Fatal(err)
			}
			saved := 0
			for b.Loop() {
				release, err := st.Lock(ctx, "alice\x00h")
				if err != nil {
					b.Fatal(err)
				}
				es, _, err := st.Load(ctx, "alice\x00h", saved)
				if err != nil || len(es) != 0 {
					b.Fatal(es, err)
				}
				if err := st.Append(ctx, "alice\x00h", saved, call); err != nil {
					b.Fatal(err)
				}
				if err := st.Append(ctx, "alice\x00h", saved+1, answer); err != nil {
					b.Fatal(err)
				}
				saved += 2
				release()
			}
		})
	}
}
