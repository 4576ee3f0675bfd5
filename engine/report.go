package engine

import "github.com/policycheck/policycheck/facts"

// FactsReport is the facts part of a decision, as `policycheck facts` and
// the sidecar's /v1/facts print it: the same keys and values as in eval's
// output (docs/decision.md).
type FactsReport struct {
	Window   facts.Position       `json:"window"`
	Facts    FactsView            `json:"facts"`
	Dispatch *DispatchFactsReport `json:"dispatch,omitempty"`
}

// DispatchFactsReport is the dispatch block of a FactsReport: eval's
// dispatch block without the decision's availability.
type DispatchFactsReport struct {
	Provider           *string        `json:"provider"`
	Window             facts.Position `json:"window"`
	Loaded             []string       `json:"loaded"`
	Evidence           EvidenceView   `json:"evidence"`
	ActiveCapabilities []string       `json:"active_capabilities"`
}

// ReportFacts builds the FactsReport of f. The slices are shared with f.
func ReportFacts(f *facts.Facts) FactsReport {
	out := FactsReport{
		Window: f.Window,
		Facts: FactsView{
			Discovered: f.Discovered, Loaded: f.Loaded, Returned: f.Returned,
			ActiveCapabilities: f.ActiveCapabilities,
		},
	}
	if d := f.Dispatch; d != nil {
		out.Dispatch = &DispatchFactsReport{
			Provider: d.Provider, Window: d.Window, Loaded: d.Loaded,
			Evidence:           EvidenceView{Discovered: d.Evidence.Discovered, Loaded: d.Evidence.Loaded},
			ActiveCapabilities: d.ActiveCapabilities,
		}
	}
	return out
}
