package server_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// The run endpoint's retries are documented where a harness author looks:
// docs/openapi.yaml describes each member of engine.Retry, the schema says
// what `exceeded: true` asks of the harness, and docs/reference/http.md's paragraph
// on incremental runs names each member.
func TestRetriesAreDocumented(t *testing.T) {
	o := loadOpenAPI(t)
	retry, ok := o.doc["components"].(map[string]any)["schemas"].(map[string]any)["Retry"].(map[string]any)
	require.True(t, ok, "openapi.yaml lost its Retry schema")
	desc, _ := retry["description"].(string)
	assert.Contains(t, desc, "`exceeded`", "the Retry schema says what exceeded asks of the harness")
	assert.Contains(t, desc, "ends the run")
	props, _ := retry["properties"].(map[string]any)

	readme, err := os.ReadFile(filepath.Join("..", "docs", "reference", "http.md"))
	require.NoError(t, err)
	text := string(readme)
	start := strings.Index(text, "Its answer adds `step`")
	require.GreaterOrEqual(t, start, 0, "docs/reference/http.md lost its paragraph on the run endpoint's retries")
	para := text[start:]
	para = para[:strings.Index(para, "\n\n")]

	typ := reflect.TypeFor[engine.Retry]()
	var fields []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
		p, ok := props[name].(map[string]any)
		if assert.True(t, ok, "openapi.yaml's Retry lacks %q", name) {
			assert.NotEmpty(t, p["description"], "openapi.yaml's Retry.%s has no description", name)
		}
		assert.Regexp(t, "[`\"]"+name+"[`\"]", para, "docs/reference/http.md's run paragraph does not name %q", name)
	}
	assert.Len(t, props, len(fields), "openapi.yaml's Retry has members engine.Retry lacks")
	assert.Contains(t, para, `"exceeded": true`)
}
