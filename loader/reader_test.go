package loader_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/loader"
)

// TestReader: a Reader reads a history as DecodeHistory does within its
// limits, and with Schema runs the schema on what the decoder accepted;
// the default is DefaultLimits and the decoder alone.
func TestReader(t *testing.T) {
	require.Equal(t, loader.Reader{Limits: loader.DefaultLimits()}, loader.DefaultReader())
	ok := []byte(`[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}]`)
	for _, r := range []loader.Reader{loader.DefaultReader(), {Limits: loader.DefaultLimits(), Schema: true}} {
		h, err := r.Read("h.json", ok)
		require.NoError(t, err)
		want, err := loader.DecodeHistory("h.json", ok, r.Limits)
		require.NoError(t, err)
		require.Equal(t, want, h)
		require.NoError(t, r.CheckSchema("h.json", ok))

		_, err = r.Read("h.json", []byte(`[{"kind": "request", "parts": [{"part_kind": "user-prompt"}]}]`))
		var le *loader.Error
		require.True(t, errors.As(err, &le), "%v", err)
		require.Equal(t, "/0/parts/0", le.Pointer)

		r.Limits.MaxMessages = 0
		r.Limits.MaxBytes = int64(len(ok) - 1)
		_, err = r.Read("h.json", ok)
		require.True(t, errors.As(err, &le), "%v", err)
		require.Equal(t, loader.KindLimit, le.Kind)
	}
	// The schema step alone, for bytes decoded elsewhere: it runs only
	// when switched on.
	notHistory := []byte(`{}`)
	require.NoError(t, loader.DefaultReader().CheckSchema("h.json", notHistory))
	require.Error(t, loader.Reader{Schema: true}.CheckSchema("h.json", notHistory))
}

// A Reader is the limits and the schema switch a surface reads histories
// with; DefaultReader is where every surface starts.
func ExampleReader() {
	r := loader.DefaultReader()
	r.Limits.MaxMessages = 1
	_, err := r.Read("history.json", []byte(`[{"kind": "request", "parts": []}, {"kind": "response", "parts": []}]`))
	fmt.Println(err)
	// Output:
	// history.json: /1: more than 1 messages
}
