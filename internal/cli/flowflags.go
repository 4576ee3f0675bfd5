package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// flowFlags are the settings of input.call.flows (docs/flows.md), shared
// by the commands that decide: eval, explain, facts, serve and replay.
// The flow flags' help, shared by serve (which binds them into
// server.Config) and the other commands (flowFlags).
const (
	flowMinLengthUsage = "shortest string of a tool return, in bytes, that a call's argument is matched against for input.call.flows (docs/flows.md)"
	flowIndexCapUsage  = "bytes of return strings indexed per history for input.call.flows; past it input.facts.flow_index_truncated is true"
	flowTokensUsage    = "match input.call.flows by token too: lines, key-value values, runs, emails, URLs, IBANs and digit runs of the sources' strings (docs/flows.md)"
)

type flowFlags struct {
	minLength, indexCap int
	tokens              bool
}

func (f *flowFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&f.minLength, "flow-min-length", facts.DefaultFlowMinLength, flowMinLengthUsage)
	fl.IntVar(&f.indexCap, "flow-index-cap", facts.DefaultFlowIndexCap, flowIndexCapUsage)
	fl.BoolVar(&f.tokens, "flow-tokens", false, flowTokensUsage)
}

// options checks the flags and returns them as engine options.
func (f *flowFlags) options() ([]engine.Option, error) {
	if f.minLength < 1 {
		return nil, badInput(fmt.Errorf("--flow-min-length must be at least 1, not %d", f.minLength))
	}
	if f.indexCap < 1 {
		return nil, badInput(fmt.Errorf("--flow-index-cap must be at least 1, not %d", f.indexCap))
	}
	return []engine.Option{engine.FlowMinLength(f.minLength), engine.FlowIndexCap(f.indexCap), engine.FlowTokens(f.tokens)}, nil
}
