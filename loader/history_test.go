package loader_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

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
