// Package runner runs shared conformance cases through the engine: the
// registry loader, the history decoder, the facts, the default policy and
// the case's filters (compiled to Rego), comparing every expectation the
// case states. `policycheck conformance` and the test suite both use it.
package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/loader"
)

// Result is the outcome of one case.
type Result struct {
	Case     conformance.Case
	Failures []string
	Decision *engine.Decision
}

// Passed reports whether every expectation held.
func (r Result) Passed() bool { return len(r.Failures) == 0 }

// FilterModules compiles a case's filters ({"cap": {"keep": [...]}}) to
// Rego capability filters.
func FilterModules(c conformance.Case) []engine.Source {
	ids := make([]string, 0, len(c.Filters))
	for id := range c.Filters {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []engine.Source
	for _, id := range ids {
		keep := c.Filters[id].Keep
		quoted := make([]string, len(keep))
		for i, k := range keep {
			b, _ := json.Marshal(k)
			quoted[i] = string(b)
		}
		set := "set()"
		if len(quoted) > 0 {
			set = "{" + strings.Join(quoted, ", ") + "}"
		}
		idq, _ := json.Marshal(id)
		src := fmt.Sprintf(`package policycheck.capabilities[%s]

prepare_tools contains t.name if {
	some t in input.tools
	t.name in %s
}
`, idq, set)
		out = append(out, engine.Source{File: fmt.Sprintf("conformance/filters/%s.rego", id), Text: src})
	}
	return out
}

// Run runs one case. An error means the case could not be run at all
// (its registry, history or filters do not load).
func Run(ctx context.Context, c conformance.Case) (Result, error) {
	res := Result{Case: c}
	name := filepath.Base(c.File)
	reg, err := loader.ParseRegistry(name+"#/registry", c.Registry)
	if err != nil {
		return res, err
	}
	h, err := loader.DefaultReader().Read(name+"#/history", c.History)
	if err != nil {
		return res, err
	}
	eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(FilterModules(c)...))
	if err != nil {
		return res, err
	}
	d, err := eng.Decide(ctx, engine.Request{History: h})
	if err != nil {
		return res, err
	}
	res.Decision = d
	fail := func(format string, args ...any) { res.Failures = append(res.Failures, fmt.Sprintf(format, args...)) }
	e := c.Expect
	if got := (facts.Position{Message: e.Window.Message, Part: e.Window.Part}); got != d.Window {
		fail("window: want %v, got %v", got, d.Window)
	}
	check := func(what string, want, got []string) {
		if want == nil {
			want = []string{}
		}
		if !reflect.DeepEqual(want, got) {
			fail("%s: want %q, got %q", what, want, got)
		}
	}
	check("discovered", e.Discovered, d.Facts.Discovered)
	check("loaded", e.Loaded, d.Facts.Loaded)
	oracle := strings.HasPrefix(c.Name, "oracle")
	strip := func(names []string) []string {
		if !oracle {
			return names
		}
		out := []string{}
		for _, n := range names {
			if n != facts.LoadCapabilityTool && n != facts.SearchTool {
				out = append(out, n)
			}
		}
		return out
	}
	if e.Available != nil {
		check("available", *e.Available, strip(d.Available))
	}
	if e.Advertised != nil {
		check("advertised", *e.Advertised, d.Advertised)
	}
	if x := e.Dispatch; x != nil {
		if d.Dispatch == nil {
			fail("dispatch: expected, got none")
		} else {
			if !reflect.DeepEqual(x.Provider, d.Dispatch.Provider) {
				fail("dispatch provider: want %v, got %v", deref(x.Provider), deref(d.Dispatch.Provider))
			}
			if aw := (facts.Position{Message: x.AnchoredWindow.Message, Part: x.AnchoredWindow.Part}); aw != d.Dispatch.Window {
				fail("anchored window: want %v, got %v", aw, d.Dispatch.Window)
			}
			check("evidence discovered", x.EvidenceDiscovered, d.Dispatch.Evidence.Discovered)
			narrowed := []string{}
			for _, id := range x.EvidenceLoaded {
				if reg.IsDeferred(id) {
					narrowed = append(narrowed, id)
				}
			}
			check("evidence loaded (narrowed to deferred ids)", narrowed, d.Dispatch.Evidence.Loaded)
			if x.Available != nil {
				check("dispatch available", *x.Available, strip(d.Dispatch.Available))
			}
		}
	}
	if e.Calls != nil {
		want := *e.Calls
		if len(want) != len(d.Calls) {
			fail("calls: want %d, got %d", len(want), len(d.Calls))
		} else {
			for i, w := range want {
				g := d.Calls[i]
				if w.Tool != g.Tool || deref(w.ToolCallID) != deref(g.ToolCallID) || w.Verdict != g.Verdict {
					fail("call %d: want %s %s %s, got %s %s %s (%s)", i, deref(w.ToolCallID), w.Tool, w.Verdict,
						deref(g.ToolCallID), g.Tool, g.Verdict, g.Message)
				}
			}
		}
	}
	return res, nil
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
