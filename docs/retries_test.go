package docs_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestReadmeRetriesMatchOpenAPI: docs/reference/http.md's paragraph (once
// the README's) on a run
// answer's retries says of count, budget, charged, free and exceeded
// what docs/openapi.yaml's Retry schema says (backticks and case aside).
func TestReadmeRetriesMatchOpenAPI(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Description string `yaml:"description"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	retry := doc.Components.Schemas["Retry"].Properties
	require.NotEmpty(t, retry)

	readme, err := os.ReadFile("reference/http.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "Its answer adds `step`")
	require.True(t, ok)
	para, _, _ := strings.Cut(rest, "\n\n")
	norm := func(s string) string {
		s = strings.NewReplacer("`", "", "\"", "", "'", "").Replace(strings.ToLower(s))
		return strings.Join(strings.Fields(s), " ")
	}
	for _, field := range []string{"count", "budget", "charged", "free", "exceeded"} {
		d := retry[field].Description
		require.NotEmpty(t, d, field)
		for _, sentence := range strings.Split(strings.TrimSuffix(d, "."), ". ") {
			assert.Contains(t, norm(para), norm(sentence), "docs/reference/http.md on retries[].%s", field)
		}
	}
}
