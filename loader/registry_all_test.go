package loader_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/loader"
)

// A registry with several mistakes, of the schema and of the rules the
// schema cannot state, gets every one of them in one run, each with its
// pointer, in document order: five mistakes took four runs before.
func TestRegistryReportsEveryMistakeAtOnce(t *testing.T) {
	_, err := loader.ParseRegistry("tools.yaml", []byte(`capabilities:
  - id: vault
    defer_loading: yes_please
  - id: vault
tools:
  - name: get_time
    max_retrys: 2
  - name: get_time
  - name: read_secret
    capability: vaulty
  - name: load_capability
  - nam: x
`))
	require.Error(t, err)
	j, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "several errors, joined: %v", err)
	var got []string
	for _, e := range j.Unwrap() {
		var le *loader.Error
		require.True(t, errors.As(e, &le), "%T", e)
		got = append(got, le.Pointer+": "+le.Msg)
	}
	assert.Equal(t, []string{
		`/capabilities/0/defer_loading: must be a boolean, not a string`,
		`/capabilities/1/id: duplicate capability id "vault" (first at /capabilities/0)`,
		`/tools/0/max_retrys: unknown key "max_retrys"`,
		`/tools/1/name: duplicate tool name "get_time" (first at /tools/0)`,
		`/tools/2/capability: tool "read_secret" names unknown capability "vaulty"`,
		`/tools/3/name: tool name 'load_capability' is reserved for deferred capability loading`,
		`/tools/4: missing required key "name"`,
		`/tools/4/nam: unknown key "nam"`,
	}, got)

	// A schema mistake and a rule's at one place are said once.
	_, err = loader.ParseRegistry("tools.yaml", []byte("tools:\n  - name: \"\"\n  - name: 7\n"))
	require.Error(t, err)
	assert.Equal(t, "tools.yaml: /tools/0/name: must not be empty\ntools.yaml: /tools/1/name: must be a string, not a number", err.Error())
}
