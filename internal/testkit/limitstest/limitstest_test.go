package limitstest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/limitstest"
	"github.com/policycheck/policycheck/loader"
)

// TestEachLimitIsCrossedByOne: a history decodes under plenty and fails
// under each of the others, at a limit.
func TestEachLimitIsCrossedByOne(t *testing.T) {
	data := []byte(`[{"kind":"request","parts":[]},{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]},{"kind":"request","parts":[{"part_kind":"user-prompt","content":"again"}]}]`)
	h, err := loader.DecodeHistory("t.json", data, loader.DefaultLimits())
	require.NoError(t, err)
	lims := limitstest.OneShort(loader.DefaultLimits(), h, len(data))
	require.Len(t, lims, 4)
	require.Equal(t, loader.DefaultLimits(), lims[0])
	for _, lim := range lims[1:] {
		_, err := loader.DecodeHistory("t.json", data, lim)
		var le *loader.Error
		require.ErrorAs(t, err, &le)
		require.Equal(t, loader.KindLimit, le.Kind, fmt.Sprint(lim))
	}
	require.Len(t, limitstest.OneShort(loader.DefaultLimits(), h[:2], len(data)), 1)
	require.Len(t, limitstest.OneShort(loader.DefaultLimits(), append(h[:1:1], h[0], h[0]), len(data)), 3, "no part limit below a history of no parts")
}
