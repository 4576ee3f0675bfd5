package gen_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
	"github.com/policycheck/policycheck/loader"
)

// optionsFor varies every knob with the seed, so that the sweep covers
// empty registries, compaction-heavy runs and noisy histories.
func optionsFor(seed int64) gen.Options {
	o := gen.Default(int(seed*113) % 301)
	o.Tools = int(seed*7) % 41
	o.Capabilities = int(seed) % 7
	o.CompactionRate = []float64{0, 0.03, 0.2, 0.6}[seed%4]
	o.Noise = []float64{0, 0.02, 0.1, 0.3, 0.02}[seed%5]
	return o
}

// TestHistoriesDecodeAndValidate checks 200 seeds, with every knob varied
// and sizes from 0 to 300 messages, against the decoder, the shipped JSON
// Schema and the registry parser.
func TestHistoriesDecodeAndValidate(t *testing.T) {
	lim := loader.DefaultLimits()
	for seed := int64(0); seed < 200; seed++ {
		o := optionsFor(seed)
		if seed%50 == 49 {
			o.Messages = 300
		}
		name := fmt.Sprintf("seed=%d,messages=%d", seed, o.Messages)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data := gen.History(seed, o)
			h, err := loader.DecodeHistory(name, data, lim)
			require.NoError(t, err)
			require.Len(t, h, o.Messages)

			// The schema validator is slow: every tenth seed under -short
			// and under -race (scripts/test.sh runs all without -race).
			if (!testing.Short() && !racetest.Enabled) || seed%10 == 0 {
				doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
				require.NoError(t, err)
				require.NoError(t, loader.ValidateHistorySchema(name, doc))
			}

			_, err = loader.ParseRegistry(name+".json", gen.Registry(seed, o))
			require.NoError(t, err)
		})
	}
}

func TestDeterministic(t *testing.T) {
	o := gen.Default(120)
	o.Noise = 0.1
	require.Equal(t, gen.History(42, o), gen.History(42, o))
	require.Equal(t, gen.Registry(42, o), gen.Registry(42, o))
	require.NotEqual(t, gen.History(42, o), gen.History(43, o))
}

func TestHistoryJoinsMessagesAndPrefixesAgree(t *testing.T) {
	o := gen.Default(80)
	o.Noise = 0.05
	msgs := gen.Messages(7, o)
	require.Len(t, msgs, 80)
	require.Equal(t, append(append([]byte("["), bytes.Join(msgs, []byte(","))...), ']'), gen.History(7, o))
	// A shorter history is a prefix of a longer one.
	for _, n := range []int{0, 1, 2, 17, 79} {
		o.Messages = n
		require.Equal(t, msgs[:n], gen.Messages(7, o), "prefix of %d", n)
	}
	// Each message decodes on its own, as an appended batch of one.
	for i, m := range msgs {
		batch := append(append([]byte("["), m...), ']')
		got, err := loader.DecodeMessages("m.json", batch, i, loader.DefaultLimits())
		require.NoError(t, err)
		require.Len(t, got, 1)
	}
}

func TestEmpty(t *testing.T) {
	require.Equal(t, "[]", string(gen.History(1, gen.Options{})))
	require.Empty(t, gen.Messages(1, gen.Options{}))
	reg, err := loader.ParseRegistry("r.json", gen.Registry(1, gen.Options{}))
	require.NoError(t, err)
	require.Empty(t, reg.ToolNames())
}

// TestCoversEveryEvidenceKind checks that the default options, over a
// couple of hundred seeds, write every form of evidence the rules read.
func TestCoversEveryEvidenceKind(t *testing.T) {
	seen := map[string]int{}
	for seed := int64(0); seed < 200; seed++ {
		o := gen.Default(60)
		data := gen.History(seed, o)
		if bytes.Contains(data, []byte(`"added":[`)) {
			seen["delta with legacy added key"]++
		}
		h, err := loader.DecodeHistory("h.json", data, loader.DefaultLimits())
		require.NoError(t, err)
		for _, m := range h {
			if m.Kind == facts.Response {
				prov := "null"
				if m.HasProvider {
					prov = m.Provider
				}
				seen["response from "+prov]++
			}
			for _, p := range m.Parts {
				switch {
				case p.Kind == facts.UserPrompt:
					seen["user prompt"]++
				case p.Kind == facts.Text:
					seen["text"]++
				case p.Kind == facts.ToolCall && p.ToolKind == facts.ToolKindNone:
					seen["plain call"]++
				case p.Kind == facts.ToolReturn && p.ToolKind == facts.ToolKindNone && p.Reveals != nil:
					seen["legacy metadata search return"]++
				case p.Kind == facts.ToolReturn && p.ToolKind == facts.ToolKindNone:
					seen["plain return"]++
				case p.Kind == facts.ToolCall && p.ToolKind == facts.ToolKindSearch:
					seen["typed search call"]++
				case p.Kind == facts.ToolReturn && p.ToolKind == facts.ToolKindSearch:
					seen["typed search return"]++
				case p.Kind == facts.BuiltinToolCall && p.ToolKind == facts.ToolKindSearch:
					seen["native search call"]++
				case p.Kind == facts.BuiltinToolReturn && p.ToolKind == facts.ToolKindSearch && len(p.Reveals) > 0:
					seen["native search return"]++
				case p.Kind == facts.ToolCall && p.ToolKind == facts.ToolKindLoad && p.HasLoadID && p.Args[0] == '{':
					seen["load call, object args"]++
				case p.Kind == facts.ToolCall && p.ToolKind == facts.ToolKindLoad && p.HasLoadID && p.Args[0] == '"':
					seen["load call, string args"]++
				case p.Kind == facts.ToolReturn && p.ToolKind == facts.ToolKindLoad:
					seen["load return"]++
				case p.Kind == facts.ToolAvailabilityDelta && p.HasToolCallID:
					seen["delta from a call"]++
				case p.Kind == facts.ToolAvailabilityDelta:
					seen["delta without call"]++
				case p.Kind == facts.RetryPrompt:
					seen["retry prompt"]++
				case p.Kind == facts.Compaction:
					prov := "null"
					if p.HasProvider {
						prov = p.Provider
					}
					seen[fmt.Sprintf("compaction from %s, payload %v", prov, p.HasPayload)]++
				}
			}
		}
		if bytes.Contains(data, []byte(`"encrypted_content":"gAAAA`)) {
			seen["openai-style compaction"]++
		}
		if bytes.Contains(data, []byte(`"content":"Summary of the conversation`)) {
			seen["anthropic-style compaction"]++
		}
	}
	for _, want := range []string{
		"user prompt", "text", "plain call", "plain return", "legacy metadata search return",
		"typed search call", "typed search return", "native search call", "native search return",
		"load call, object args", "load call, string args", "load return",
		"delta from a call", "delta without call", "delta with legacy added key", "retry prompt",
		"response from anthropic", "response from openai", "response from google", "response from null",
		"openai-style compaction", "anthropic-style compaction",
	} {
		require.Positive(t, seen[want], "never generated: %s", want)
	}
	for _, prov := range []string{"anthropic", "openai", "google", "null"} {
		require.Positive(t, seen["compaction from "+prov+", payload true"]+seen["compaction from "+prov+", payload false"],
			"no compaction from %s", prov)
	}
	require.Positive(t, seen["compaction from anthropic, payload false"], "no payload-less compaction")
}
