package redistest_test

import (
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// TestClusterServesEachSlotOnItsNode: the started cluster is one
// cluster (every node knows all three) and NodeOf names the node that
// serves a key: a write there is taken, on another node it is
// redirected (MOVED); keys spread over all three nodes.
func TestClusterServesEachSlotOnItsNode(t *testing.T) {
	c := redistest.StartCluster(t)
	if !strings.HasPrefix(c.URL, "redis+cluster://"+c.Nodes[0].Addr+"?addr=") {
		t.Fatalf("URL %q", c.URL)
	}
	owners := map[string]bool{}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		owner := c.NodeOf(t, key)
		owners[owner] = true
		for _, n := range c.Nodes {
			_, err := redistest.Do(n.Addr, "SET", key, "1")
			switch {
			case n.Addr == owner && err != nil:
				t.Fatalf("SET %s on its node %s: %v", key, owner, err)
			case n.Addr != owner && (err == nil || !strings.Contains(err.Error(), "MOVED")):
				t.Fatalf("SET %s on %s, not its node %s: %v, want MOVED", key, n.Addr, owner, err)
			}
		}
	}
	if len(owners) != 3 {
		t.Fatalf("8 keys on %d nodes, want all 3", len(owners))
	}
}
