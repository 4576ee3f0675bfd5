package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
)

// okReceipts verifies the receipt "ok" and no other: a stand-in for a
// receipt signer, so that generated histories hold receipts that verify
// and receipts that do not.
type okReceipts struct{}

func (okReceipts) VerifyReceipt(r, _ string, _ *string, _ string, _ []byte) error {
	if r == "ok" {
		return nil
	}
	return errors.New("receipt rejected: not ok")
}

// withReceipts returns a copy of h in which about half the tool returns
// carry a receipt, "ok" or "bad".
func withReceipts(r *rand.Rand, h facts.History) facts.History {
	out := slices.Clone(h)
	for i := range out {
		out[i].Parts = slices.Clone(out[i].Parts)
		for p := range out[i].Parts {
			if out[i].Parts[p].Kind != facts.ToolReturn {
				continue
			}
			switch r.IntN(4) {
			case 0, 1:
				out[i].Parts[p].Receipt = []byte(`"ok"`)
			case 2:
				out[i].Parts[p].Receipt = []byte(`"bad"`)
			}
		}
	}
	return out
}

// withoutParts returns a copy of h without the parts the decision's
// unverified_evidence names: the history as if it never held that
// evidence, built without the facts package's own removal.
func withoutParts(h facts.History, drop []engine.UnverifiedEvidence) facts.History {
	gone := map[facts.Position]bool{}
	for _, u := range drop {
		gone[facts.Position{Message: u.Message, Part: u.Part}] = true
	}
	out := slices.Clone(h)
	for i := range out {
		var parts []facts.Part
		for p, part := range out[i].Parts {
			if !gone[facts.Position{Message: i, Part: p}] {
				parts = append(parts, part)
			}
		}
		out[i].Parts = parts
	}
	return out
}

// TestVerifiedEvidenceNeverAddsTools: over generated registries and
// histories (those of the property tests, with receipts that verify and
// receipts that do not), a decision with verified evidence — stateless
// with receipts, and a Run that vouches for the calls it judged execute —
// never makes available, at the next request or at dispatch, a tool that
// the same history with the unverifiable evidence removed does not; nor,
// without capability filters, one that the client's word (the history as
// sent) does not.
func TestVerifiedEvidenceNeverAddsTools(t *testing.T) {
	ctx := context.Background()
	seeds := racetest.Size(24, 8)
	if testing.Short() {
		seeds = 8
	}
	decisions, unverified, vouched, counted := 0, 0, 0, 0
	check := func(t *testing.T, e *engine.Engine, monotone bool, h facts.History, ctxDoc any, d *engine.Decision) {
		t.Helper()
		removed, err := e.Decide(ctx, engine.Request{History: withoutParts(h, d.UnverifiedEvidence), Context: ctxDoc})
		require.NoError(t, err)
		client, err := e.Decide(ctx, engine.Request{History: h, Context: ctxDoc})
		require.NoError(t, err)
		assert.Subset(t, removed.Available, d.Available, "verified available ⊆ available without the unverifiable evidence")
		if d.Dispatch != nil {
			assert.Subset(t, removed.Dispatch.Available, d.Dispatch.Available, "at dispatch")
		}
		// Against the history as sent only without capability filters:
		// a filter that drops a tool while another capability is active
		// drops less when verified evidence loads less.
		if monotone {
			assert.Subset(t, client.Available, d.Available, "verified available ⊆ the client's word")
			if d.Dispatch != nil {
				assert.Subset(t, client.Dispatch.Available, d.Dispatch.Available, "at dispatch, the client's word")
			}
		}
		decisions++
		unverified += len(d.UnverifiedEvidence)
		counted += len(d.Facts.Discovered) + len(d.Facts.Loaded)
		if !slices.Equal(client.Available, d.Available) || len(d.UnverifiedEvidence) > 0 {
			return
		}
		vouched++
	}
	for _, pc := range propertyCases(t, seeds) {
		e, err := engine.New(ctx, pc.opts...)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(uint64(pc.seed), 0x65766964))
		for _, req := range pc.requests {
			t.Run(req.name+"/stateless", func(t *testing.T) {
				h := withReceipts(r, req.history)
				d, err := e.Decide(ctx, engine.Request{History: h, Context: req.context}, engine.VerifiedEvidence(okReceipts{}))
				require.NoError(t, err)
				check(t, e, len(pc.filters) == 0, h, req.context, d)
			})
		}
		// A run stepped through the longest history, one dispatch at a
		// time: what it judged execute vouches.
		full := pc.requests[len(pc.requests)-1]
		t.Run(full.name+"/run", func(t *testing.T) {
			run := e.NewRun(engine.RunVerifiedEvidence(nil, "run"))
			from := 0
			for i := range full.history {
				if full.history[i].Kind != facts.Response && i != len(full.history)-1 {
					continue
				}
				d, err := run.Step(ctx, full.history[from:i+1], full.context)
				require.NoError(t, err)
				from = i + 1
				check(t, e, len(pc.filters) == 0, full.history[:i+1], full.context, d)
			}
		})
	}
	t.Logf("%d decisions, %d pieces of unverified evidence, %d names discovered or loaded through vouched evidence, %d decisions where verified evidence changed nothing",
		decisions, unverified, counted, vouched)
	assert.Positive(t, unverified, "the generator must produce unverifiable evidence, or the property is vacuous")
	assert.Positive(t, counted, "the generator must produce evidence that is vouched for, or the property is vacuous")
}
