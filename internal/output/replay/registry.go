package replay

import (
	"fmt"
	"strconv"

	"github.com/policycheck/policycheck/facts"
)

// RegistryChanges lists what registry c changes from registry b, a line
// each: capabilities added, removed or no longer (or now) deferred, then
// tools added, removed, moved to another capability, deferred or not on
// their own, or given another retry budget. Descriptions, which no
// decision reads, are left out. Nil when the two decide alike.
func RegistryChanges(b, c *facts.Registry) []string {
	var out []string
	for _, bc := range b.Capabilities() {
		cc, ok := c.Capability(bc.ID)
		switch {
		case !ok:
			out = append(out, "capability "+bc.ID+": removed")
		case cc.DeferLoading != bc.DeferLoading:
			out = append(out, fmt.Sprintf("capability %s: defer_loading %t -> %t", bc.ID, bc.DeferLoading, cc.DeferLoading))
		}
	}
	for _, cc := range c.Capabilities() {
		if _, ok := b.Capability(cc.ID); !ok {
			out = append(out, fmt.Sprintf("capability %s: added (defer_loading %t)", cc.ID, cc.DeferLoading))
		}
	}
	// A tool's own defer_loading: Tools forces it on for the tools of a
	// deferred capability, which the capability's line already says.
	own := func(r *facts.Registry, t facts.Tool) bool { return t.DeferLoading && !r.IsDeferred(t.Capability) }
	for _, bt := range b.Tools() {
		ct, ok := c.Tool(bt.Name)
		if !ok {
			out = append(out, "tool "+bt.Name+": removed")
			continue
		}
		if ct.Capability != bt.Capability {
			out = append(out, fmt.Sprintf("tool %s: capability %s -> %s", bt.Name, orNone(bt.Capability), orNone(ct.Capability)))
		}
		if bo, co := own(b, bt), own(c, ct); bo != co {
			out = append(out, fmt.Sprintf("tool %s: defer_loading %t -> %t", bt.Name, bo, co))
		}
		if br, cr := retries(bt), retries(ct); br != cr {
			out = append(out, fmt.Sprintf("tool %s: max_retries %s -> %s", bt.Name, br, cr))
		}
	}
	for _, ct := range c.Tools() {
		if _, ok := b.Tool(ct.Name); !ok {
			out = append(out, fmt.Sprintf("tool %s: added (capability %s)", ct.Name, orNone(ct.Capability)))
		}
	}
	return out
}

func orNone(capability string) string {
	if capability == "" {
		return "none"
	}
	return capability
}

// retries is a tool's retry budget as the registry reads it (1 unless
// max_retries says otherwise).
func retries(t facts.Tool) string {
	if t.MaxRetries == nil {
		return "1"
	}
	return strconv.Itoa(*t.MaxRetries)
}
