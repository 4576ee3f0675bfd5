package server

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/trust"
)

// maxSpent bounds the approval signatures a sidecar remembers at once.
// Each is kept until its exp, at most --approval-max-ttl: a sidecar
// applying more than this many approvals within that time refuses the
// next ones (fail closed) rather than forget one it applied.
const maxSpent = 100_000

// spentApprovals remembers, per process, the approval signatures this
// sidecar applied (a signature is used once) and those a decision in
// flight holds, until each one's exp, after which the signature counts
// nowhere anyway. It is shared by all requests; its mutex guards it.
type spentApprovals struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[[sha256.Size]byte]spentEntry
}

type spentEntry struct {
	run     string    // the run the decision that holds or used it was a step of ("" stateless)
	at      time.Time // when it was applied (or claimed)
	expiry  int64     // the signature's exp, Unix seconds
	pending bool      // a decision in flight holds it
}

func newSpentApprovals(now func() time.Time) *spentApprovals {
	return &spentApprovals{now: now, m: map[[sha256.Size]byte]spentEntry{}}
}

// approvalClaim is what one decision holds of the table: the verified
// signatures of its approvals, by tool_call_id. Settle it once the
// decision is answered; release frees what was not settled.
type approvalClaim struct {
	t    *spentApprovals
	held map[string][sha256.Size]byte
}

// claim holds every verified signature of approvals for a decision of
// run: one the sidecar applied before, or that another decision in
// flight holds, is refused (trust.Used) with why, as is one the
// table has no room for. It returns the approvals as the decision is to
// read them and the claim.
func (t *spentApprovals) claim(approvals facts.Approvals, run string) (facts.Approvals, *approvalClaim) {
	c := &approvalClaim{t: t}
	if t == nil || len(approvals) == 0 {
		return approvals, c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var out facts.Approvals
	for _, id := range slices.Sorted(maps.Keys(approvals)) {
		a := approvals[id]
		if a.Verification != trust.Verified {
			continue
		}
		// Keyed by what the signature signs, not by how it is spelled.
		key, parsed := trust.UseKey(a.Signature)
		refused := ""
		if !parsed {
			refused = "the signature is not a compact JWS" // Check verified it: not reached
		} else if e, ok := t.m[key]; ok && e.expiry > now.Unix() {
			refused = e.why(now)
		} else if len(t.m) >= maxSpent && t.sweep(now) >= maxSpent {
			refused = fmt.Sprintf("not recorded: this sidecar remembers %d approval signatures it applied and not yet expired, its limit, "+
				"and applies no other until one expires (a signature is used once)", maxSpent)
		}
		if refused != "" {
			if out == nil {
				out = maps.Clone(approvals)
			}
			a.Refused, a.Verification, a.Approvers = refused, trust.Used, nil
			out[id] = a
			continue
		}
		t.m[key] = spentEntry{run: run, at: now, expiry: a.Expiry, pending: true}
		if c.held == nil {
			c.held = map[string][sha256.Size]byte{}
		}
		c.held[id] = key
	}
	if out == nil {
		return approvals, c
	}
	return out, c
}

func (e spentEntry) why(now time.Time) string {
	where := "on a stateless decision"
	if e.run != "" {
		where = fmt.Sprintf("on run %q", e.run)
	}
	if e.pending {
		return "already used: another decision in flight " + where + " holds this signature (a signature is used once)"
	}
	return fmt.Sprintf("already used: this sidecar applied this signature %s, %s ago, and a signature is used once: ask the approver for a new one",
		where, now.Sub(e.at).Round(time.Second))
}

// sweep drops the expired entries and returns how many are left.
func (t *spentApprovals) sweep(now time.Time) int {
	for k, e := range t.m {
		if e.expiry <= now.Unix() {
			delete(t.m, k)
		}
	}
	return len(t.m)
}

// settle records as used the signatures whose approval d applied (nil d:
// none) and frees the others; a settled claim holds nothing.
func (c *approvalClaim) settle(d *engine.Decision) {
	if c == nil || len(c.held) == 0 {
		return
	}
	applied := map[string]bool{}
	if d != nil {
		for _, o := range d.Approvals {
			applied[o.ToolCallID] = o.Applied
		}
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	for id, key := range c.held {
		if applied[id] {
			e := c.t.m[key]
			e.pending = false
			c.t.m[key] = e
		} else {
			delete(c.t.m, key)
		}
	}
	c.held = nil
}

// release frees what the claim still holds: the decision gave no answer.
func (c *approvalClaim) release() { c.settle(nil) }
