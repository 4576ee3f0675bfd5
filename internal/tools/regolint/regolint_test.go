package regolint_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/tools/regolint"
)

const meta = "# METADATA\n# title: t\n# description: d\n"

func TestLint(t *testing.T) {
	cases := []struct {
		note string
		file string
		text string
		want []string // "rule@row"; nil means clean
	}{
		{note: "a clean filter",
			file: "vault.rego",
			text: meta + "package policycheck.capabilities.vault\n\n" + meta + "prepare_tools contains t.name if some t in input.tools\n"},
		{note: "import rego.v1 is a no-op",
			file: "p.rego",
			text: meta + "package policycheck.lib.x\n\nimport rego.v1\n\nallow := true\n",
			want: []string{"v1-syntax@6"}},
		{note: "v0 syntax does not parse as v1",
			file: "p.rego", text: meta + "package policycheck.lib.x\n\nallow { true }\n",
			want: []string{"v1-syntax@6"}},
		{note: "a policy without package metadata",
			file: "p.rego", text: "package policycheck.lib.x\n\nallow := true\n",
			want: []string{"package-metadata@1"}},
		{note: "an entrypoint rule without metadata",
			file: "r.rego", text: meta + "package policycheck.rules.r\n\nhide contains \"x\" if input.context.guest\n",
			want: []string{"entrypoint-metadata@6"}},
		{note: "one annotated definition of a multi-definition entrypoint is enough",
			file: "r.rego",
			text: meta + "package policycheck.rules.r\n\n" + meta + "deny contains \"a\" if input.a\n\ndeny contains \"b\" if input.b\n"},
		{note: "a filter without metadata on prepare_tools",
			file: "c.rego", text: meta + "package policycheck.capabilities[\"my-cap\"]\n\nprepare_tools := set()\n",
			want: []string{"entrypoint-metadata@6"}},
		{note: "a test file's package must end in _test",
			file: "x_test.rego", text: "package x\n\ntest_ok if true\n",
			want: []string{"test-naming@1"}},
		{note: "tests are named test_<behaviour>",
			file: "x_test.rego", text: "package x_test\n\ntestOK if true\n\ntest_fine if true\n",
			want: []string{"test-naming@3"}},
		{note: "a test outside a test file",
			file: "p.rego", text: meta + "package policycheck.lib.x\n\ntest_ok if true\n",
			want: []string{"test-naming@6"}},
		{note: "a filter calling a nondeterministic built-in",
			file: "c.rego",
			text: meta + "package policycheck.capabilities.vault\n\n" + meta +
				"prepare_tools := {t.name | some t in input.tools} if time.now_ns() > 0\n",
			want: []string{"filter-nondeterminism@9"}},
		{note: "rules may use nondeterministic built-ins (they are not cached)",
			file: "r.rego",
			text: meta + "package policycheck.rules.r\n\n" + meta + "hide contains \"x\" if time.now_ns() < 0\n"},
		{note: "a line over 120 columns",
			file: "x_test.rego", text: "package x_test\n\ntest_long if \"" + strings.Repeat("a", 120) + "\" != \"\"\n",
			want: []string{"line-length@3"}},
		{note: "120 columns is fine, counted in runes",
			file: "x_test.rego", text: "package x_test\n\n# " + strings.Repeat("é", 118) + "\ntest_ok if true\n"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			var got []string
			for _, f := range regolint.Lint(tc.file, tc.text) {
				got = append(got, f.Rule+"@"+strconv.Itoa(f.Row))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// allowed are known violations, each keyed by the offending line's text so
// that the entry fails the test once the line changes. There are none.
var allowed = map[string]string{
	// OPA refuses a second package annotation for one package ("package
	// annotation redeclared"): lib.rego carries policycheck.lib's, and
	// calls.rego's, flows.rego's and integrity.rego's header comments
	// point to it.
	"policies/lib/calls.rego:package-metadata:package policycheck.lib":     "one package annotation per package",
	"policies/lib/flows.rego:package-metadata:package policycheck.lib":     "one package annotation per package",
	"policies/lib/integrity.rego:package-metadata:package policycheck.lib": "one package annotation per package",
}

// The shipped policies, the example policies and the scenario suites
// follow the rules.
func TestRepositoryRegoIsClean(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	used := map[string]bool{}
	n := 0
	for _, dir := range []string{"policies", "examples/policies", "policy_test"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(p) != ".rego" {
				return err
			}
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			n++
			lines := strings.Split(string(b), "\n")
			for _, f := range regolint.Lint(rel, string(b)) {
				key := ""
				for k := range allowed {
					prefix := rel + ":" + f.Rule + ":"
					if strings.HasPrefix(k, prefix) && f.Row > 0 && strings.HasPrefix(lines[f.Row-1], strings.TrimPrefix(k, prefix)) {
						key = k
					}
				}
				if key != "" {
					used[key] = true
					continue
				}
				t.Error(f.String())
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, n, 15, "the walk found the Rego files")
	for k := range allowed {
		assert.True(t, used[k], "allowlist entry %q no longer matches: remove it", k)
	}
}
