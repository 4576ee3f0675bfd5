package contract

//go:generate go run ./generate

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// The files written from the types of document.go, relative to the
// module root, and what goes between their markers.
const (
	inputDocFile = "docs/input.md"
	gateFile     = "policies/lib/gate.rego"
	documentFile = "internal/contract/document.go"
)

// Generate returns the files generated from document.go, under the module
// root root, as they should be: the decision-input and filter-input
// tables of docs/input.md and policycheck.lib.gate._input_set_paths in
// policies/lib/gate.rego (each file's text between its markers
// replaced). `go generate ./internal/contract` writes them;
// TestGeneratedFilesAreCurrent fails when a committed one differs.
func Generate(root string) (map[string][]byte, error) {
	docs, err := fieldDocs(filepath.Join(root, documentFile))
	if err != nil {
		return nil, err
	}
	decision, err := docTable(inputPaths, docs)
	if err != nil {
		return nil, err
	}
	filter, err := docTable(filterInputPaths, docs)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, f := range []struct {
		file     string
		sections map[string]string
		begin    func(name string) string
		end      func(name string) string
	}{
		{inputDocFile, map[string]string{"decision-input": decision, "filter-input": filter},
			func(n string) string { return "<!-- BEGIN GENERATED " + n + " (go generate ./internal/contract) -->\n" },
			func(n string) string { return "<!-- END GENERATED " + n + " -->" }},
		{gateFile, map[string]string{"input-set-paths": regoSetPaths()},
			func(n string) string { return "# BEGIN GENERATED " + n + " (go generate ./internal/contract)\n" },
			func(n string) string { return "# END GENERATED " + n }},
	} {
		b, err := os.ReadFile(filepath.Join(root, f.file))
		if err != nil {
			return nil, err
		}
		text := string(b)
		for name, body := range f.sections {
			begin, end := f.begin(name), f.end(name)
			i, j := strings.Index(text, begin), strings.Index(text, end)
			if i < 0 || j < i {
				return nil, fmt.Errorf("%s lacks the markers %q and %q", f.file, strings.TrimSpace(begin), end)
			}
			text = text[:i+len(begin)] + body + text[j:]
		}
		out[f.file] = []byte(text)
	}
	return out, nil
}

// docTable is the markdown table of ps: path, type and meaning.
func docTable(ps []Path, docs map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("| field | type | meaning |\n| --- | --- | --- |\n")
	for _, p := range ps {
		doc := p.Doc
		if p.Field != "" {
			doc = docs[p.Owner+"."+p.Field]
		}
		if doc == "" {
			return "", fmt.Errorf("%s: %s.%s (%s) has no doc comment", documentFile, p.Owner, p.Field, p.Path)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", p.Path, p.Type, doc)
	}
	return b.String(), nil
}

// regoSetPaths is the Rego array of InputSetPaths, as opa fmt writes it
// (with the blank line it keeps before the end marker's comment).
func regoSetPaths() string {
	var b strings.Builder
	b.WriteString("_input_set_paths := [\n")
	for _, p := range InputSetPaths() {
		keys, _ := json.Marshal(p)
		fmt.Fprintf(&b, "\t%s,\n", strings.ReplaceAll(string(keys), ",", ", "))
	}
	b.WriteString("]\n\n")
	return b.String()
}

// fieldDocs reads the doc comment of every struct field of a Go file,
// keyed "Type.Field", as one line.
func fieldDocs(file string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fld := range st.Fields.List {
			for _, name := range fld.Names {
				out[ts.Name.Name+"."+name.Name] = strings.Join(strings.Fields(fld.Doc.Text()), " ")
			}
		}
		return false
	})
	return out, nil
}
