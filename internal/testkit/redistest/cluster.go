package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// Cluster is a Redis Cluster of three redis-server processes, masters
// without replicas, each serving a third of the hash slots.
type Cluster struct {
	// Nodes are the cluster's servers; Nodes[i] serves the i-th third
	// of the slots.
	Nodes []*Server
	// URL names the cluster as --session-store does:
	// redis+cluster://Nodes[0].Addr?addr=Nodes[1].Addr&addr=Nodes[2].Addr.
	URL string
}

// StartCluster starts a three-node Redis Cluster without persistence and
// waits until every node says cluster_state:ok; its servers are killed
// when the test ends. Without redis-server the test is skipped (failed
// under CI=true), as Start does.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	Bin(t)
	c, err := newCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newCluster is StartCluster outside any one test (SharedCluster's):
// the caller closes it. Without redis-server it fails; a test calls Bin
// first to be skipped instead.
func newCluster() (c *Cluster, err error) {
	bin, err := bin()
	if err != nil {
		return nil, err
	}
	c = &Cluster{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for range 3 {
		port, err := clusterPort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redistest-cluster-")
		if err != nil {
			return nil, err
		}
		s := &Server{bin: bin, dir: dir, port: port, cluster: true}
		s.name()
		c.Nodes = append(c.Nodes, s)
		if err := s.start(); err != nil {
			return nil, err
		}
	}
	for i, s := range c.Nodes {
		lo, hi := i*slots/len(c.Nodes), (i+1)*slots/len(c.Nodes)-1
		if _, err := Do(s.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			// Redis 6 has no ADDSLOTSRANGE: each slot by name.
			args := []string{"CLUSTER", "ADDSLOTS"}
			for slot := lo; slot <= hi; slot++ {
				args = append(args, strconv.Itoa(slot))
			}
			if _, err := Do(s.Addr, args...); err != nil {
				return nil, fmt.Errorf("assigning slots %d-%d: %w", lo, hi, err)
			}
		}
		// Distinct epochs, as redis-cli --cluster create sets them: the
		// nodes need not resolve a collision before they agree.
		if _, err := Do(s.Addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return nil, err
		}
	}
	// Every node meets every other: none waits for gossip to learn of
	// a third.
	for _, a := range c.Nodes {
		for _, b := range c.Nodes {
			if a == b {
				continue
			}
			if _, err := Do(a.Addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(b.port)); err != nil {
				return nil, err
			}
		}
	}
	// A master says ok two seconds after it started at the earliest
	// (Redis's CLUSTER_WRITABLE_DELAY).
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range c.Nodes {
		for {
			info, err := Do(s.Addr, "CLUSTER", "INFO")
			text, _ := info.(string)
			if err == nil && strings.Contains(text, "cluster_state:ok") && strings.Contains(text, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the cluster node %s is not ready after 20s: %v %s", s.Addr, err, text)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	c.URL = "redis+cluster://" + c.Nodes[0].Addr + "?addr=" + c.Nodes[1].Addr + "&addr=" + c.Nodes[2].Addr
	return c, nil
}

// Close kills the cluster's servers and removes their directories.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		s.Kill()
		_ = os.RemoveAll(s.dir)
	}
}

// Flush empties every node (FLUSHALL), for the next test of a shared
// cluster.
func (c *Cluster) Flush(t testing.TB) {
	t.Helper()
	for _, s := range c.Nodes {
		if _, err := Do(s.Addr, "FLUSHALL"); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterPort is a free port whose bus port (port+10000, which Redis 6
// and 7 both take by default) is free too.
func clusterPort() (int, error) {
	for range 100 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, errors.New("no free port with a free cluster bus port (port+10000) in 100 tries")
}

// NodeOf returns the address of the node that serves key, as the
// cluster says: the key's slot (CLUSTER KEYSLOT) and its owner (CLUSTER
// NODES).
func (c *Cluster) NodeOf(t testing.TB, key string) string {
	t.Helper()
	v, err := Do(c.Nodes[0].Addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatal(err)
	}
	slot, ok := v.(int64)
	if !ok {
		t.Fatalf("CLUSTER KEYSLOT %q answered %v", key, v)
	}
	v, err = Do(c.Nodes[0].Addr, "CLUSTER", "NODES")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := v.(string)
	addr, err := slotOwner(text, int(slot))
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// slotOwner reads CLUSTER NODES's answer (a line a node: id,
// ip:port@bus, flags, master, ping, pong, epoch, link, slots...) for
// the address of the master that serves slot.
func slotOwner(nodes string, slot int) (string, error) {
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "master") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			loS, hiS, isRange := strings.Cut(r, "-")
			if !isRange {
				hiS = loS
			}
			lo, err1 := strconv.Atoi(loS)
			hi, err2 := strconv.Atoi(hiS)
			if err1 != nil || err2 != nil {
				return "", fmt.Errorf("CLUSTER NODES: a slot range %q", r)
			}
			if lo <= slot && slot <= hi {
				return addr, nil
			}
		}
	}
	return "", fmt.Errorf("CLUSTER NODES names no master of slot %d:\n%s", slot, nodes)
}

// StartNode starts a cluster-enabled redis-server in no cluster: it
// serves no slot, so its cluster_state is fail. It is killed when the
// test ends.
func StartNode(t testing.TB) *Server {
	t.Helper()
	port, err := clusterPort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: Bin(t), dir: t.TempDir(), port: port, cluster: true}
	s.name()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// SharedCluster is one Cluster the tests of a test package share (a
// cluster takes two seconds to say it is ready): a package-level value,
// started by the first test that asks for it (Get), closed by the
// package's TestMain after m.Run (Close). Tests that share it run one
// at a time (not t.Parallel): each gets it flushed.
type SharedCluster struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Get returns the shared cluster, empty, starting it the first time.
// Without redis-server the test is skipped (failed under CI=true).
func (s *SharedCluster) Get(t testing.TB) *Cluster {
	t.Helper()
	Bin(t)
	s.once.Do(func() { s.c, s.err = newCluster() })
	if s.err != nil {
		t.Fatal(s.err)
	}
	s.c.Flush(t)
	return s.c
}

// Close kills the cluster, if it was started.
func (s *SharedCluster) Close() {
	if s.c != nil {
		s.c.Close()
	}
}
