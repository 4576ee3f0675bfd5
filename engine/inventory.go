package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Inventory is what a policy set defines, by name: its packages and the
// number of definitions of each rule. Comparing the inventory of the
// policies serving with that of the policies about to replace them tells
// what a change drops (Dropped): a deleted guard file, a package renamed,
// one of several "deny contains" definitions removed.
type Inventory struct {
	// Packages are the packages' paths, as "data.policycheck.rules.guard".
	Packages map[string]bool
	// Rules counts each rule's definitions (a default, an incremental
	// definition, a function's clause: an else chain is one), by path,
	// as "data.policycheck.rules.guard.deny".
	Rules map[string]int
}

// inventoryOf takes the inventory of a policy set's parsed modules.
func inventoryOf(ps *policySet) Inventory {
	inv := Inventory{Packages: map[string]bool{}, Rules: map[string]int{}}
	for _, m := range ps.modules {
		inv.Packages[m.Package.Path.String()] = true
		for _, r := range m.Rules {
			inv.Rules[m.Package.Path.Extend(r.Head.Ref().GroundPrefix()).String()]++
		}
	}
	return inv
}

// Inventory returns what the compiled policy set defines.
func (e *Engine) Inventory() Inventory { return e.snap.Load().inventory }

// ReadInventory reads and parses the policies that New would load with
// opts, without compiling them (no registry is needed), and returns their
// inventory: for a policy set that compiles only against a registry not
// known yet. A policy set that does not parse is a *PolicyError.
func ReadInventory(_ context.Context, opts ...Option) (Inventory, error) {
	cfg := config{defaults: true}
	for _, o := range opts {
		o(&cfg)
	}
	ps, err := loadPolicies(cfg.defaults, cfg.fsys, cfg.sources, cfg.paths)
	if err != nil {
		return Inventory{}, err
	}
	return inventoryOf(ps), nil
}

// Dropped lists, sorted, what inv defines that next does not: the
// packages next no longer has, and the rules it no longer defines
// ("data.p.deny"; those of a dropped package too) or defines fewer times
// ("data.p.deny (2 definitions, now 1)").
func (inv Inventory) Dropped(next Inventory) (packages, rules []string) {
	for _, p := range slices.Sorted(maps.Keys(inv.Packages)) {
		if !next.Packages[p] {
			packages = append(packages, p)
		}
	}
	for _, r := range slices.Sorted(maps.Keys(inv.Rules)) {
		n, now := inv.Rules[r], next.Rules[r]
		switch {
		case now >= n:
		case now == 0:
			rules = append(rules, r)
		default:
			rules = append(rules, fmt.Sprintf("%s (%s, now %d)", r, definitions(n), now))
		}
	}
	return packages, rules
}

func definitions(n int) string {
	if n == 1 {
		return "1 definition"
	}
	return strconv.Itoa(n) + " definitions"
}
