package loader_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/limitstest"
	"github.com/policycheck/policycheck/loader"
)

// TestDecodeMessagesPointersCountFromOffset: messages appended to a history
// that already holds some are named by their index in the whole history.
func TestDecodeMessagesPointersCountFromOffset(t *testing.T) {
	data := []byte(`[{"kind":"request","parts":[]},{"kind":"bogus","parts":[]}]`)
	_, err := loader.DecodeMessages("run", data, 5, loader.DefaultLimits())
	var le *loader.Error
	require.True(t, errors.As(err, &le))
	require.Equal(t, "/6/kind", le.Pointer)

	msgs, err := loader.DecodeMessages("run", []byte(`[{"kind":"request","parts":[]}]`), 5, loader.DefaultLimits())
	require.NoError(t, err)
	require.Len(t, msgs, 1)

	lim := loader.DefaultLimits()
	lim.MaxMessages = 6
	_, err = loader.DecodeMessages("run", data, 5, lim)
	require.True(t, errors.As(err, &le))
	require.Equal(t, loader.KindLimit, le.Kind)
	require.Equal(t, "/6", le.Pointer)
}

// TestDecodeArrayIsDecodeHistory decodes every seed history, some
// generated ones of a few hundred messages and the adversarial seeds
// (message boundaries inside strings and tool arguments) with one to
// eight goroutines and with each limit one short: the messages and errors
// are DecodeHistory's, whatever the goroutines guessed.
func TestDecodeArrayIsDecodeHistory(t *testing.T) {
	seeds := fuzzSeeds(t)
	for seed := int64(1); seed <= 3; seed++ {
		o := gen.Default(300)
		o.Noise = 0.2
		seeds = append(seeds, gen.History(seed, o))
	}
	plenty := loader.DefaultLimits()
	for i, data := range seeds {
		want, err := loader.DecodeHistory("fuzz.json", data, plenty)
		limits := []loader.Limits{plenty}
		if err == nil {
			limits = limitstest.OneShort(plenty, want, len(data))
		}
		for _, lim := range limits {
			want, err := loader.DecodeHistory("fuzz.json", data, lim)
			requireArrayAgrees(t, data, want, err, lim)
			for workers := 5; workers <= 8; workers++ {
				a, errA := loader.DecodeArray("fuzz.json", data, lim, workers)
				require.Equal(t, err, errA, "seed %d, %d goroutines", i, workers)
				if err == nil {
					require.Equal(t, want, a.Messages, "seed %d, %d goroutines", i, workers)
				}
			}
		}
	}
}
