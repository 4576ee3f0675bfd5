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

// TestDecodeElementsPointersAndLimits: elements decoded apart name their
// errors by their index in the whole history, count the message and part
// limits as DecodeMessages does, and refuse anything after the message.
func TestDecodeElementsPointersAndLimits(t *testing.T) {
	ok := []byte(`{"kind":"request","parts":[]}`)
	bad := []byte(`{"kind":"bogus","parts":[]}`)
	var le *loader.Error
	_, err := loader.DecodeElements("run", [][]byte{ok, bad}, 5, loader.DefaultLimits())
	require.True(t, errors.As(err, &le))
	require.Equal(t, "/6/kind", le.Pointer)

	msgs, err := loader.DecodeElements("run", [][]byte{ok, ok}, 5, loader.DefaultLimits())
	require.NoError(t, err)
	require.Len(t, msgs, 2)

	lim := loader.DefaultLimits()
	lim.MaxMessages = 6
	_, err = loader.DecodeElements("run", [][]byte{ok, ok}, 5, lim)
	require.True(t, errors.As(err, &le))
	require.Equal(t, loader.KindLimit, le.Kind)
	require.Equal(t, "/6", le.Pointer)

	part := []byte(`{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}`)
	lim = loader.DefaultLimits()
	lim.MaxParts = 1
	_, err = loader.DecodeElements("run", [][]byte{part, part}, 0, lim)
	require.True(t, errors.As(err, &le))
	require.Equal(t, "/1/parts/0", le.Pointer)

	_, err = loader.DecodeElements("run", [][]byte{append(append([]byte{}, ok...), ` {}`...)}, 0, loader.DefaultLimits())
	require.True(t, errors.As(err, &le))
	require.Equal(t, loader.KindSyntax, le.Kind)

	lim = loader.DefaultLimits()
	lim.MaxBytes = int64(len(ok))
	_, err = loader.DecodeElements("run", [][]byte{ok, ok}, 0, lim)
	require.True(t, errors.As(err, &le))
	require.Equal(t, loader.KindLimit, le.Kind)
}
