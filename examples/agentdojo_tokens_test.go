package examples_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
	"github.com/policycheck/policycheck/loader"
)

// tokenCounts counts the token flows of calls by class: on the
// AgentDojo-style runs' benign and injected calls, and on every call of
// generated histories, whose arguments copy nothing a token could
// carry, so that every token flow there is a match by chance.
type tokenCounts map[string]map[facts.TokenClass]int

func (c tokenCounts) add(group string, flows []facts.Flow) {
	if c[group] == nil {
		c[group] = map[facts.TokenClass]int{}
	}
	for _, f := range flows {
		if f.Match == facts.FlowToken {
			c[group][f.Token]++
		}
	}
}

func (c tokenCounts) table(groups ...string) string {
	var b strings.Builder
	b.WriteString("| token class |")
	for _, g := range groups {
		b.WriteString(" " + g + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(groups)) + "\n")
	for cls := facts.TokenEmail; cls <= facts.TokenRun; cls++ {
		fmt.Fprintf(&b, "| %s |", cls)
		for _, g := range groups {
			fmt.Fprintf(&b, " %d |", c[g][cls])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestTokenFlowClasses measures what each token class matches (issue 47
// item 2; docs/flows.md, "Tokens"): on the AgentDojo-style runs, the
// token flows of the benign calls (the user's own task: each one asks
// when its source is labelled) and of the injected ones; on generated
// histories (internal/testkit/gen, 1,000 messages, three seeds; one
// under the race detector, and in full without it: scripts/test.sh), the
// token flows of every call, all by chance. go test ./examples -run
// TestTokenFlowClasses -v prints the table docs/flows.md shows.
func TestTokenFlowClasses(t *testing.T) {
	if testing.Short() {
		t.Skip("derives the flows of every response of generated histories")
	}
	counts := tokenCounts{}
	o := facts.Options{Flows: true, FlowTokens: true}
	for _, suite := range agentDojoSuites {
		m := readAgentDojoManifest(t, suite)
		reg, err := loader.ReadRegistry(filepath.Join("agentdojo", suite, "registry.yaml"))
		require.NoError(t, err)
		for _, r := range m.Runs {
			path := filepath.Join("agentdojo", suite, r.History)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			h, err := loader.DecodeHistory(path, b, loader.DefaultLimits())
			require.NoError(t, err)
			flows, _ := facts.Flows(h, reg, o)
			require.Len(t, flows, len(r.Calls), r.ID)
			for i, c := range r.Calls {
				counts.add("agentdojo "+c.Expect+" calls", flows[i])
			}
		}
	}
	calls := 0
	for seed := int64(1); seed <= int64(racetest.Size(3, 1)); seed++ {
		g := gen.Default(1000)
		reg, err := loader.ParseRegistry("gen.json", gen.Registry(seed, g))
		require.NoError(t, err)
		lim := loader.DefaultLimits()
		lim.MaxBytes = 1 << 30
		h, err := loader.DecodeHistory("gen.json", gen.History(seed, g), lim)
		require.NoError(t, err)
		for n := range h {
			if h[n].Kind != facts.Response {
				continue
			}
			flows, _ := facts.Flows(h[:n+1], reg, o)
			for _, f := range flows {
				calls++
				counts.add("generated, by chance", f)
			}
		}
	}
	t.Logf("%d calls of generated histories\n%s", calls, counts.table("agentdojo benign calls", "agentdojo injected calls", "generated, by chance"))
	require.Positive(t, calls)
}
