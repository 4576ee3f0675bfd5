package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// factsOutput is the facts part of eval's JSON (design.md).
type factsOutput struct {
	Window   facts.Position      `json:"window"`
	Facts    engine.FactsView    `json:"facts"`
	Dispatch *factsDispatchBlock `json:"dispatch,omitempty"`
}

type factsDispatchBlock struct {
	Provider           *string             `json:"provider"`
	Window             facts.Position      `json:"window"`
	Loaded             []string            `json:"loaded"`
	Evidence           engine.EvidenceView `json:"evidence"`
	ActiveCapabilities []string            `json:"active_capabilities"`
}

func newFactsCmd() *cobra.Command {
	var in inputFlags
	var format string
	cmd := &cobra.Command{
		Use:   "facts --registry R --history H [--format facts|input]",
		Short: "Print what the model was shown: the facts your policies will see",
		Long: `facts derives from a message history the facts that policies decide on: the post-compaction window,
discovered tools, loaded capabilities, successful returns, the active capability set and, when the
history ends with a response, the dispatch facts anchored to its serving provider.

With --format input it prints the whole input document the engine hands to Rego (filters evaluated
with the given policies), ready to commit as an opa test fixture.` + exitCodesHelp,
		Example: `  policycheck facts --registry examples/registry.yaml --history examples/histories/refund.json
  policycheck facts --registry examples/registry.yaml --history examples/histories/refund.json --format input`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, err := in.load(cmd)
			if err != nil {
				return err
			}
			switch format {
			case "facts":
				f := facts.Derive(loaded.history, loaded.reg)
				return writeJSON(cmd, factsJSON(&f))
			case "input":
				eng, err := in.engine(cmd.Context(), loaded.reg)
				if err != nil {
					return err
				}
				doc, err := eng.Input(cmd.Context(), engine.Request{History: loaded.history, Context: loaded.context})
				if err != nil {
					return badInput(err)
				}
				return writeJSON(cmd, doc)
			}
			return badInput(fmt.Errorf("--format must be facts or input, not %q", format))
		},
	}
	in.register(cmd, true)
	cmd.Flags().StringVar(&format, "format", "facts", "facts (the facts as eval reports them) or input (the Rego input document)")
	return cmd
}

func factsJSON(f *facts.Facts) factsOutput {
	out := factsOutput{
		Window: f.Window,
		Facts: engine.FactsView{
			Discovered: f.Discovered, Loaded: f.Loaded, Returned: f.Returned,
			ActiveCapabilities: f.ActiveCapabilities,
		},
	}
	if d := f.Dispatch; d != nil {
		out.Dispatch = &factsDispatchBlock{
			Provider: d.Provider, Window: d.Window, Loaded: d.Loaded,
			Evidence:           engine.EvidenceView{Discovered: d.Evidence.Discovered, Loaded: d.Evidence.Loaded},
			ActiveCapabilities: d.ActiveCapabilities,
		}
	}
	return out
}
