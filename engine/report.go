package engine

import "github.com/policycheck/policycheck/facts"

// FactsReport is the facts part of a decision, as `policycheck facts` and
// the sidecar's /v1/facts print it: the same keys and values as in eval's
// output (docs/decision.md).
type FactsReport struct {
	Window facts.Position `json:"window"`
	Facts  factsView      `json:"facts"`
	// Dispatch is the dispatch block without its Available (nil: the
	// facts decide nothing).
	Dispatch *dispatchView `json:"dispatch,omitempty"`
}

// ReportFacts builds the FactsReport of f. The slices are shared with f.
func ReportFacts(f *facts.Facts) FactsReport {
	out := FactsReport{
		Window: f.Window,
		Facts: factsView{
			Discovered: f.Discovered, Loaded: f.Loaded, Returned: f.Returned,
			ActiveCapabilities: f.ActiveCapabilities,
		},
	}
	if d := f.Dispatch; d != nil {
		out.Dispatch = &dispatchView{
			Provider: d.Provider, Window: d.Window, Loaded: d.Loaded,
			Evidence:           evidenceView{Discovered: d.Evidence.Discovered, Loaded: d.Evidence.Loaded},
			ActiveCapabilities: d.ActiveCapabilities,
		}
	}
	return out
}
