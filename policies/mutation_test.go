package policies_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/internal/testkit/racetest"
	"github.com/policycheck/policycheck/internal/tools/regomutant"
)

// sourcesOfBranches is why the mutants of _sources_of's threshold change no
// decision.
const sourcesOfBranches = "both branches give an argument's sources in the order of its flows (grouped once, " +
	"or scanned per argument): the threshold chooses a cost, not a result (test_many_flows_are_grouped_by_argument " +
	"and the tests with a few flows check each)"

// equivalentMutants are the mutants of the shipped policies that change no
// decision, each with the reason. Keys are regomutant.Mutant.ID().
// TestMutantsOfTheGateAreKilled fails when one of them is killed (it is
// not equivalent after all) or no longer generated (the list is stale).
var equivalentMutants = func() map[string]string {
	m := map[string]string{
		"availability.rego decision: swap-else with the next branch": "evaluates every decision under input_sets and " +
			"registry_sets, which are the documents themselves when they hold sets: a cost, not a behaviour",
		"availability.rego advertised: swap-else with the next branch": "the first branch is the second's shortcut: when the " +
			"outgoing history kept every reveal and load, gate.available over the kept evidence is available (and both are " +
			"empty when a filter failed)",
		"availability.rego verdicts: drop-rule default verdicts := []": "the comprehension is always defined (an empty " +
			"array without calls), so the default is never used",
		"gate.rego present_framework[else 1]: swap-else with the next branch": "once the first branch failed, the " +
			"conditions of branches 1 and 2 cannot both hold, so their order does not matter",
		"gate.rego available: swap-else with the next branch": "the first branch is the second specialised to nothing " +
			"removed (a fast path): the second gives the same set then",
		"gate.rego verdict[else 2]: drop-expr not internal.member_2(call.tool, _framework)": "a resolved framework tool is " +
			"always in available_now: both take present_framework of the same removed set",
		"gate.rego input_with_call: drop-expr is_object(input)": "object.union is undefined exactly when input is not " +
			"an object, which takes the else branch either way",
		"lib.rego registry_keep_own: swap-else with the next branch": "the else branch converts with as_set, which " +
			"returns a set unchanged: the same result at a higher cost",
		"lib.rego as_set: swap-else with the next branch": "the swapped rule always builds {x | some x in xs}, which " +
			"is xs for a set and the set of its elements for an array: as_set itself",
		"integrity.rego _window_words[else 1]: swap-else with the next branch": "a builtin-tool-return's branch and " +
			"an unpaired-return's require different kinds: never both, so their order does not matter",
		"integrity.rego _window_words[else 3]: swap-else with the next branch": "the unpaired-return branch for several " +
			"returns and the one-return branch after it (count 1) cannot both hold: their order does not matter",
		"integrity.rego _latest_three: compare > -> >=": "with exactly three items the first branch slices all three " +
			"and counts none more, which is what the else branch gives",
		"integrity.rego _sources_of: drop-expr gt(count(flows), 64)": sourcesOfBranches,
		"integrity.rego _sources_of: negate gt(count(flows), 64)":    sourcesOfBranches,
		"integrity.rego _sources_of: compare > -> <=":                sourcesOfBranches,
		"integrity.rego _sources_of: compare > -> >=":                sourcesOfBranches,
		"integrity.rego _sources_of: swap-else with the next branch": sourcesOfBranches,
	}
	// The operator contract's rules (denials_of, denial, names_set).
	for id, why := range map[string]string{
		"gate.rego denials_of: swap-else with the next branch": "is_set(ds) and ds == true " +
			"cannot both hold: the order of the two branches does not matter",
		"gate.rego denials_of[else 1]: swap-else with the next branch": "ds == true and ds == false " +
			"cannot both hold: the order of the two branches does not matter",
		"gate.rego denial: swap-else with the next branch": "is_string(x) and is_object(x) cannot both " +
			"hold: the order of the two branches does not matter",
		"gate.rego denial[else 1]: drop-expr is_object(x)": "for any other x, object.get in the " +
			"branch's value fails (OPA moves it into the body), so the branch fails as with the check",
		"gate.rego names_set: drop-expr is_set(s)": "for a value that is not a set, s & _registry.names " +
			"fails, which fails the branch as the check does",
		"gate.rego names_set: negate is_set(s)": "a set then takes the second branch, which accepts every " +
			"set the first accepts (a set within the registry names is a set of strings): a cost, not a behaviour",
		"gate.rego names_set: swap-else with the next branch": "the first branch is a fast path of the " +
			"second (a set within the registry names is a set of strings): either order gives the same answer",
		// Issue 11's unavailable_reason and issue 14's approval_request.
		"gate.rego unavailable_reason: swap-else with the next branch": "a tool's gate cannot be both \"capability\" " +
			"and \"search\": at most one of the two branches holds, so their order does not matter",
		"gate.rego approval_request: drop-expr is_object(x)": "equivalent under opa test, which evaluates " +
			"non-strict: a scalar fails `every` (it needs a collection) and an empty array or set passes it but " +
			"fails object.get in the value (moved into the body), so the branch fails as with the check; the " +
			"engine's strict builtin errors do tell an empty array apart, and engine's " +
			"TestRequireApprovalValueRefusedAtRunTime kills it there (scripts/rego-mutants.sh)",
		// Issue 33's counting helpers: the guards of _ns keep a built-in
		// from erring on a timestamp of the wrong form.
		"calls.rego _ns: drop-expr is_string(ts)": "equivalent under opa test, which evaluates non-strict: " +
			"regex.match on a number errs, which fails the branch as the check does; under the engine's strict " +
			"builtin errors it fails the decision, and engine's TestCallCountWithinReadsEveryTimestampForm kills it",
		`calls.rego _ns: drop-expr regex.match("^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$", ts)`: "equivalent under opa test, " +
			"which evaluates non-strict: time.parse_rfc3339_ns errs on another form, which fails the branch as the " +
			"check does; engine's TestCallCountWithinReadsEveryTimestampForm kills it under strict builtin errors",
		"calls.rego _ns: drop-expr is_number(ts)": "equivalent under opa test, which evaluates non-strict: " +
			"arithmetic on a string errs, which fails the branch as the check does; engine's " +
			"TestCallCountWithinReadsEveryTimestampForm kills it under strict builtin errors",
	} {
		m[id] = why
	}
	// `some pkg` only declares the variable of a ref over the rule
	// packages, which binds it the same way without the declaration.
	for _, rule := range []string{"rule_errors", "hidden", "would_hide"} {
		m["gate.rego "+rule+": drop-expr some pkg"] = "`some pkg` only declares the variable; the ref " +
			"binds it the same way without the declaration"
	}
	// registry_keep_own's fast-path checks: negated, sets take the
	// converting branch, whose as_set of a set is the set; dropped, an
	// array operand fails the set operation OPA moves from the head into
	// the first branch's body, which fails that branch the same way.
	for _, x := range []string{"names", "own", "allowed"} {
		m["lib.rego registry_keep_own: negate is_set("+x+")"] = "sets take the converting branch: " +
			"the same result at a higher cost"
		m["lib.rego registry_keep_own: drop-expr is_set("+x+")"] = "an array fails the set operation of the " +
			"first branch (compiled into its body), so the converting else branch runs as with the check"
	}
	return m
}()

// regoTestPaths are the Rego test suites run against every mutant: the
// shipped policies' unit tests and the recorded-run scenarios.
var regoTestPaths = []string{".", "../policy_test"}

// shippedPolicyFiles are the policies mutated: the non-test modules of
// policies/lib and policies/availability, by the name the loader gave them.
func shippedPolicyFiles(modules map[string]*ast.Module) []string {
	var out []string
	for name := range modules {
		rel := filepath.ToSlash(filepath.Clean(name))
		if (strings.HasPrefix(rel, "lib/") || strings.HasPrefix(rel, "availability/")) && !strings.HasSuffix(rel, "_test.rego") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Every mutant of the shipped gate that changes behaviour is killed by the
// Rego tests: each rule of policies/lib and policies/availability broken
// in every way regomutant knows (drop a condition, negate it, flip a set
// operation or a comparison, swap or drop an else branch, drop a
// definition or a default), the unit tests and the recorded-run scenarios
// run in-process, and a survivor not listed in equivalentMutants fails.
// scripts/rego-mutants.sh runs the slower half (go test of engine/ and
// policies/ per mutant); docs/contributing.md records the latest kill table.
func TestMutantsOfTheGateAreKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("the mutation run takes a while; not in -short")
	}
	if racetest.Enabled {
		t.Skip("not under -race (slow, and nothing shared to race on): scripts/test.sh runs it without -race")
	}
	ctx := context.Background()
	modules, store, err := regomutant.LoadTests(regoTestPaths)
	if err != nil {
		t.Fatal(err)
	}
	files := shippedPolicyFiles(modules)
	if len(files) < 3 {
		t.Fatalf("found only %v to mutate", files)
	}
	var mutants []regomutant.Mutant
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := regomutant.Generate(f, string(src))
		if err != nil {
			t.Fatal(err)
		}
		mutants = append(mutants, ms...)
	}
	outcomes, err := regomutant.Run(ctx, modules, store, mutants)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	killed, stillborn, equivalent := 0, 0, 0
	type row struct{ killed, total, equivalent, stillborn int }
	byFile := map[string]*row{}
	for _, o := range outcomes {
		id := o.Mutant.ID()
		seen[id] = true
		why, listed := equivalentMutants[id]
		r := byFile[o.Mutant.File]
		if r == nil {
			r = &row{}
			byFile[o.Mutant.File] = r
		}
		if o.Stillborn == "" {
			r.total++
		}
		switch {
		case o.Stillborn != "":
			stillborn++
			r.stillborn++
			t.Logf("stillborn (does not compile): %s", id)
		case o.KilledBy != "":
			killed++
			r.killed++
			if listed {
				t.Errorf("listed as equivalent (%s) but killed by %s: %s", why, o.KilledBy, id)
			}
		case listed:
			equivalent++
			r.equivalent++
		default:
			t.Errorf("survived: %s (%s:%d); add the test it shows is missing, or list it in equivalentMutants with why",
				id, o.Mutant.File, o.Mutant.Row)
		}
	}
	for id := range equivalentMutants {
		if !seen[id] {
			t.Errorf("equivalentMutants lists %q, which is no longer generated", id)
		}
	}
	for _, f := range files {
		r := byFile[f]
		if r == nil {
			continue
		}
		t.Logf("| %s | %d | %d | %d | %d |", f, r.killed, r.total, r.equivalent, r.stillborn)
	}
	total := len(outcomes) - stillborn
	t.Logf("mutants: %d killed / %d (%d equivalent, %d survived); %d stillborn", killed, total,
		equivalent, total-killed-equivalent, stillborn)
}
