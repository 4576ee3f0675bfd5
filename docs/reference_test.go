package docs_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/loader"
)

// The repository explains itself without ../shared: these tests hold
// docs/registry.md, docs/decision.md and docs/semantics.md to the code.

// tableFields returns the first cells of a Markdown file's table rows,
// backquotes removed: the fields a reference page describes.
func tableFields(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// Every field of the registry's JSON Schema is described in
// docs/registry.md, and every example there loads.
func TestRegistryDocCoversTheFormat(t *testing.T) {
	var schema struct {
		Properties map[string]any `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(loader.RegistrySchema(), &schema))
	fields := tableFields(t, "registry.md")
	doc, err := os.ReadFile("registry.md")
	require.NoError(t, err)
	for name := range schema.Properties {
		assert.Contains(t, string(doc), name+":", "docs/registry.md has no example of the top-level %q", name)
	}
	require.NotEmpty(t, schema.Defs)
	for def, d := range schema.Defs {
		for name := range d.Properties {
			assert.True(t, fields[name], "docs/registry.md does not describe %s.%s", def, name)
			assert.Regexp(t, `(?m)^ +(- )?`+name+`:`, string(doc), "docs/registry.md has no YAML example of %s.%s", def, name)
		}
	}
	loaded := 0
	for _, lang := range []string{"yaml", "json"} {
		for i, block := range codeBlocks(t, "registry.md", lang) {
			_, err := loader.ParseRegistry("registry.md."+lang+strconv.Itoa(i), []byte(block))
			assert.NoError(t, err, "docs/registry.md's example:\n%s", block)
			loaded++
		}
	}
	assert.GreaterOrEqual(t, loaded, 4)
	// The doc's whole registry is the example registry.
	example, err := os.ReadFile("../examples/registry.yaml")
	require.NoError(t, err)
	body := string(example)[strings.Index(string(example), "capabilities:"):]
	assert.Contains(t, string(doc), "```yaml\n"+body+"```", "docs/registry.md's whole registry is examples/registry.yaml")
}

// jsonFields lists the JSON members of a Go type, as docs/decision.md
// names them (a.b for a nested object, a[].b for an array's elements).
func jsonFields(typ reflect.Type, prefix string, out map[string]bool, stop map[string]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		if typ.Kind() == reflect.Slice {
			prefix += "[]"
		}
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			jsonFields(f.Type, prefix, out, stop)
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out[path] = true
		if !stop[path] && f.Type.String() != "[]string" {
			jsonFields(f.Type, path, out, stop)
		}
	}
}

// Every member of the decision document (engine.Decision as it is
// written), every verdict and every exit code is described in
// docs/decision.md.
func TestDecisionDocCoversTheDocument(t *testing.T) {
	want := map[string]bool{}
	// A call's approval has the members of approvals[], described there.
	jsonFields(reflect.TypeFor[engine.Decision](), "", want, map[string]bool{"calls[].approval": true, "window": true, "dispatch.window": true})
	require.True(t, want["calls[].verdict"] && want["dispatch.evidence.loaded"] && want["approvals[].why"], "%v", want)
	fields := tableFields(t, "decision.md")
	for f := range want {
		assert.True(t, fields[f], "docs/decision.md does not describe %q", f)
	}
	for f := range fields {
		if _, err := strconv.Atoi(f); err != nil && !want[f] && !isVerdict(f) {
			t.Errorf("docs/decision.md describes %q, which the decision does not have", f)
		}
	}
	for _, v := range []string{engine.Execute, engine.NotAvailableYet, engine.UnknownTool, engine.Denied, engine.ApprovalRequired} {
		assert.True(t, fields[v], "docs/decision.md does not describe the verdict %q", v)
	}
	for _, code := range []int{cli.ExitOK, cli.ExitFailed, cli.ExitBadUsage, cli.ExitRefused} {
		assert.True(t, fields[strconv.Itoa(code)], "docs/decision.md does not describe exit code %d", code)
	}
	// Its example is a decision the engine makes, members and all.
	blocks := codeBlocks(t, "decision.md", "json")
	require.NotEmpty(t, blocks)
	var example map[string]any
	require.NoError(t, json.Unmarshal([]byte(blocks[0]), &example))
	stdout, stderr, code := run(t, "eval", "--registry", "../examples/registry.yaml", "--history", "../examples/histories/refund.json")
	require.Equal(t, 0, code, stderr)
	var real map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &real))
	for _, k := range []string{"facts", "available", "advertised", "window"} {
		assert.Equal(t, real[k], example[k], "docs/decision.md's example, %s", k)
	}
}

func isVerdict(s string) bool {
	switch s {
	case engine.Execute, engine.NotAvailableYet, engine.UnknownTool, engine.InvalidArgs, engine.Denied, engine.ApprovalRequired:
		return true
	}
	return false
}

// Every example of docs/semantics.md prints what the page shows.
func TestSemanticsDocExamples(t *testing.T) {
	blocks := codeBlocks(t, "semantics.md", "console")
	require.GreaterOrEqual(t, len(blocks), 2)
	t.Chdir("..")
	for _, b := range blocks {
		first, want, _ := strings.Cut(b, "\n")
		line, ok := strings.CutPrefix(first, "$ policycheck ")
		require.True(t, ok, "an example of docs/semantics.md that is not a policycheck command: %q", first)
		args, err := splitArgs(line)
		require.NoError(t, err)
		stdout, stderr, code := run(t, args...)
		require.Equal(t, 0, code, stderr)
		// The fingerprint's digest changes with any edit of the shipped
		// policies or the example registry: masked, as in trust.md's.
		want = fingerprint.ReplaceAllString(want, "${1}<digest>")
		stdout = fingerprint.ReplaceAllString(stdout, "${1}<digest>")
		assert.Equal(t, want, stdout, "docs/semantics.md: %s", first)
	}
}

// The README, the docs and the Go sources point at no document outside
// the repository: ../shared holds the conformance corpus only (and the
// specification's table that internal/testkit/spectable reads as test input).
func TestNoDocumentOutsideTheRepository(t *testing.T) {
	outside := regexp.MustCompile(`shared/(?:design\.md|spec/|style\.md|seeds/|reference/)|\bdesign\.md\b`)
	allowed := map[string]bool{"../internal/testkit/spectable/spectable.go": true}
	files := []string{"../README.md", "../BENCHMARKS.md"}
	for _, pattern := range []string{"*.md", "reference/*.md"} {
		md, err := filepath.Glob(pattern)
		require.NoError(t, err)
		files = append(files, md...)
	}
	require.NoError(t, filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	}))
	for _, f := range files {
		if allowed[f] {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) {
				t.Errorf("%s:%d points outside the repository: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
