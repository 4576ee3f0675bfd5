package docs_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/policycheck/policycheck"

// mapRow is a row of docs/architecture.md's package map.
type mapRow struct {
	kind  string
	floor int      // its index in floors
	may   []string // module packages it may import directly
	never []string // what it must not reach, even indirectly
}

// floors are the floors of the house, bottom to top: a package imports
// packages on its floor or below, and a ground package ground packages
// alone.
var floors = []string{"ground", "model", "engine", "output", "server", "command"}

// floorDirs are the directories that hold one floor's internal packages.
var floorDirs = map[string]string{"internal/ground/": "ground", "internal/output/": "output"}

// packageMap reads the package map of docs/architecture.md: the table
// whose header begins "| package | kind |".
func packageMap(t *testing.T) map[string]mapRow {
	t.Helper()
	raw, err := os.ReadFile("architecture.md")
	require.NoError(t, err)
	ticks := regexp.MustCompile("`([^`]+)`")
	names := func(cell string) []string {
		var out []string
		for _, m := range ticks.FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
		return out
	}
	rows := map[string]mapRow{}
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "| package | kind |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cells, 6, "architecture.md: a package map row has six cells: %s", line)
		pkg := names(cells[0])
		require.Len(t, pkg, 1, "architecture.md: the first cell names one package: %s", line)
		require.NotContains(t, rows, pkg[0], "architecture.md: %s has two rows", pkg[0])
		kind := strings.TrimSpace(cells[1])
		require.Contains(t, []string{"public", "command", "internal", "test-kit", "tool", "tests", "planned"}, kind,
			"architecture.md: %s's kind", pkg[0])
		floor := slices.Index(floors, strings.TrimSpace(cells[2]))
		require.GreaterOrEqual(t, floor, 0, "architecture.md: %s's floor is one of %v", pkg[0], floors)
		rows[pkg[0]] = mapRow{kind: kind, floor: floor, may: names(cells[4]), never: names(cells[5])}
	}
	require.NotEmpty(t, rows, "architecture.md has no package map")
	return rows
}

// goPackage is a package of the module as go list describes it (tests
// not included: what a build of the package links).
type goPackage struct {
	imports []string // the module's packages it imports directly, module-relative
	deps    []string // everything it reaches, full import paths
}

func listPackages(t *testing.T) map[string]goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	rel := func(p string) (string, bool) {
		if p == modulePath {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, modulePath+"/")
		return r, ok
	}
	pkgs := map[string]goPackage{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		require.Len(t, parts, 3, line)
		name, _ := rel(parts[0])
		var p goPackage
		for _, imp := range strings.Fields(parts[1]) {
			if r, ok := rel(imp); ok {
				p.imports = append(p.imports, r)
			}
		}
		p.deps = strings.Fields(parts[2])
		pkgs[name] = p
	}
	return pkgs
}

// reaches reports whether deps reach rule: "OPA", a module package, or
// "x/..." (x and every package below it).
func reaches(deps []string, rule string) []string {
	var hits []string
	for _, d := range deps {
		var hit bool
		switch {
		case rule == "OPA":
			hit = strings.HasPrefix(d, "github.com/open-policy-agent/opa/")
		case strings.HasSuffix(rule, "/..."):
			base := modulePath + "/" + strings.TrimSuffix(rule, "/...")
			hit = d == base || strings.HasPrefix(d, base+"/")
		default:
			hit = d == modulePath+"/"+rule
		}
		if hit {
			hits = append(hits, d)
		}
	}
	return hits
}

// TestArchitectureMap holds docs/architecture.md's package map to the
// module: every package has a row and every row a package (planned rows
// excepted), every direct import of the module's packages is one its row
// allows, nothing reaches what its row forbids, and no package but a
// test-kit one imports a test-kit package, and the test-kit packages are
// those under internal/testkit. Floors: no package imports one on a
// higher floor (and no row allows it), a ground package imports ground
// packages alone, the floor directories hold their floor's packages, and
// a package under an owner's nested internal/ stands on its owner's
// floor.
func TestArchitectureMap(t *testing.T) {
	rows := packageMap(t)
	pkgs := listPackages(t)
	for name := range pkgs {
		assert.Contains(t, rows, name, "package %s is not in docs/architecture.md's package map: add its row", name)
	}
	testKit := map[string]bool{}
	for name, row := range rows {
		if _, ok := pkgs[name]; !ok && row.kind != "planned" {
			t.Errorf("docs/architecture.md's package map lists %s, which does not exist: remove its row, or mark it planned", name)
		}
		if row.kind == "test-kit" {
			testKit[modulePath+"/"+name] = true
		}
		inKit := name == "internal/testkit" || strings.HasPrefix(name, "internal/testkit/")
		assert.Equal(t, inKit, row.kind == "test-kit", "docs/architecture.md: %s is of kind test-kit exactly when it is under internal/testkit", name)
		for _, m := range row.may {
			up, ok := rows[m]
			assert.True(t, ok, "docs/architecture.md: %s may import %s, which has no row", name, m)
			if ok && up.floor > row.floor {
				t.Errorf("docs/architecture.md: %s (floor %s) may import %s, which stands on the higher floor %s", name, floors[row.floor], m, floors[up.floor])
			}
		}
		checkPlace(t, rows, name, row)
	}
	for name, p := range pkgs {
		row, ok := rows[name]
		if !ok {
			continue
		}
		for _, imp := range p.imports {
			assert.True(t, slices.Contains(row.may, imp),
				"%s imports %s, which its row in docs/architecture.md does not allow: add it to \"may import\" if the map should allow it", name, imp)
			up, ok := rows[imp]
			switch {
			case !ok || up.floor == row.floor:
			case row.floor == 0:
				t.Errorf("%s is a ground package and imports %s (floor %s): a ground package imports ground packages alone", name, imp, floors[up.floor])
			case up.floor > row.floor:
				t.Errorf("%s (floor %s) imports %s, which stands on the higher floor %s: the house is built from the ground up", name, floors[row.floor], imp, floors[up.floor])
			}
		}
		for _, rule := range row.never {
			assert.Empty(t, reaches(p.deps, rule), "%s reaches %s, which its row in docs/architecture.md forbids", name, rule)
		}
		if row.kind != "test-kit" {
			for _, d := range p.deps {
				assert.False(t, testKit[d], "%s (%s) imports the test-kit package %s: only tests may", name, row.kind, d)
			}
		}
	}
}

// checkPlace holds a row's floor to where its package sits: the floor
// directories (internal/ground/, internal/output/) hold their floor's
// packages, and a package under an owner's nested internal/ (such as
// server/internal/mask) stands on its owner's floor.
func checkPlace(t *testing.T, rows map[string]mapRow, name string, row mapRow) {
	t.Helper()
	for dir, floor := range floorDirs {
		if strings.HasPrefix(name, dir) {
			assert.Equal(t, floor, floors[row.floor], "docs/architecture.md: %s is under %s, which holds floor %s", name, dir, floor)
		}
	}
	if i := strings.LastIndex(name, "/internal/"); i > 0 {
		owner := name[:i]
		o, ok := rows[owner]
		if assert.True(t, ok, "docs/architecture.md: %s's owner %s has no row", name, owner) {
			assert.Equal(t, floors[o.floor], floors[row.floor], "docs/architecture.md: %s sits beside its owner %s and stands on its floor", name, owner)
		}
	}
}

// jsonDecode is one encoding/json decode of production code: a call of
// json.Unmarshal or json.NewDecoder.
type jsonDecode struct {
	file, fn, call string
	pos            token.Position
	target         ast.Expr // the decoded value's declared type, when the scan can tell it
}

func (d jsonDecode) key() string { return d.file + " " + d.fn + " " + d.call }

// jsonDecodes returns the encoding/json decodes of the module's non-test
// Go files, but those of skip (directories, module-relative) and of the
// test kit (internal/testkit, which only tests link).
func jsonDecodes(t *testing.T, skip ...string) []jsonDecode {
	t.Helper()
	var out []jsonDecode
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		if d.IsDir() {
			if path != ".." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || rel == "internal/testkit") {
				return filepath.SkipDir
			}
			for _, s := range skip {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		out = append(out, fileDecodes(t, path, rel)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fileDecodes(t *testing.T, path, rel string) []jsonDecode {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "encoding/json" {
			name = "json"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	var out []jsonDecode
	for _, decl := range f.Decls {
		fn, body := "(package)", ast.Node(decl)
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				fn = "(" + types.ExprString(fd.Recv.List[0].Type) + ")." + fn
			}
			if fd.Body == nil {
				continue
			}
			body = fd.Body
		}
		// The declared types of the function's variables, by name, to tell
		// what a decode's target is.
		declared := map[string]ast.Expr{}
		ast.Inspect(body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.ValueSpec:
				for _, id := range x.Names {
					if x.Type != nil {
						declared[id.Name] = x.Type
					}
				}
			case *ast.AssignStmt:
				if x.Tok == token.DEFINE && len(x.Lhs) == len(x.Rhs) {
					for i, l := range x.Lhs {
						if id, ok := l.(*ast.Ident); ok {
							if cl, ok := x.Rhs[i].(*ast.CompositeLit); ok && cl.Type != nil {
								declared[id.Name] = cl.Type
							}
						}
					}
				}
			}
			return true
		})
		targetOf := func(arg ast.Expr) ast.Expr {
			if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.AND {
				if id, ok := u.X.(*ast.Ident); ok {
					return declared[id.Name]
				}
			}
			return nil
		}
		decoders := map[string]bool{} // variables holding a json.NewDecoder
		ast.Inspect(body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			switch {
			case pkg.Name == name && sel.Sel.Name == "Unmarshal" && len(call.Args) == 2:
				out = append(out, jsonDecode{file: rel, fn: fn, call: "Unmarshal", pos: fset.Position(call.Pos()), target: targetOf(call.Args[1])})
			case pkg.Name == name && sel.Sel.Name == "NewDecoder":
				out = append(out, jsonDecode{file: rel, fn: fn, call: "NewDecoder", pos: fset.Position(call.Pos())})
			case sel.Sel.Name == "Decode" && len(call.Args) == 1 && decoders[pkg.Name]:
				// A decoder's target, checked as an Unmarshal's is (the
				// decoder itself is counted where it is made).
				if tt := targetOf(call.Args[0]); tt != nil {
					out = append(out, jsonDecode{file: rel, fn: fn, call: "Decode", pos: fset.Position(call.Pos()), target: tt})
				}
			}
			return true
		})
		// Variables assigned a json.NewDecoder: their Decode calls are
		// read in a second pass (the assignment precedes them).
		ast.Inspect(body, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
				if c, ok := as.Rhs[0].(*ast.CallExpr); ok {
					if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "NewDecoder" {
						if p, ok := s.X.(*ast.Ident); ok && p.Name == name {
							if id, ok := as.Lhs[0].(*ast.Ident); ok {
								decoders[id.Name] = true
							}
						}
					}
				}
			}
			return true
		})
		ast.Inspect(body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Decode" {
				if id, ok := sel.X.(*ast.Ident); ok && decoders[id.Name] {
					if tt := targetOf(call.Args[0]); tt != nil {
						out = append(out, jsonDecode{file: rel, fn: fn, call: "Decode", pos: fset.Position(call.Pos()), target: tt})
					}
				}
			}
			return true
		})
	}
	return out
}

// historyShaped reports whether a decode's target type can hold a
// history or a piece of one: a list (a history is a JSON array of
// messages: []any, []json.RawMessage, []map[string]..., []T), a type
// named for a message, part or history (json.RawMessage aside), a
// pointer to one, or a struct with a "parts", "history", "messages" or
// "part_kind" member.
func historyShaped(e ast.Expr) bool {
	named := regexp.MustCompile(`(?i)message|part|history`)
	switch x := e.(type) {
	case *ast.ArrayType:
		return true
	case *ast.StarExpr:
		return historyShaped(x.X)
	case *ast.Ident:
		return named.MatchString(x.Name)
	case *ast.SelectorExpr:
		return x.Sel.Name != "RawMessage" && named.MatchString(x.Sel.Name)
	case *ast.StructType:
		for _, f := range x.Fields.List {
			if f.Tag != nil && regexp.MustCompile(`json:"(parts|history|messages|part_kind)[",]`).MatchString(f.Tag.Value) {
				return true
			}
		}
	}
	return false
}

// allowedDecodes are the encoding/json decodes of production code outside
// the loader (the history's one reader, with its registries and
// approvals), each with why what it decodes is not a history: a new decode
// needs a line here and a reason, and a line whose decode is gone fails
// too. The number is how many of the calls (Unmarshal, NewDecoder, a
// Decode into a local whose type the scan reads) the function makes.
var allowedDecodes = map[string]string{
	"gateway/shared.go decodeNote Unmarshal":                           "a stored history entry's note (the gateway's own accounting of a call: success, failure, approvals), not a message",
	"gateway/principals.go ParseTokenFile NewDecoder":                  "--token-file, the operator's tokens and principals",
	"gateway/principals.go ParseTokenFile Decode":                      "--token-file",
	"gateway/session.go inputRequired Unmarshal":                       "a constant: the SDK's input-required result, whose type field only decoding sets",
	"gateway/session.go metaResult Unmarshal":                          "a meta-tool's own return, which the gateway wrote, as the result's structured content",
	"engine/evidence.go (*evidenceVoucher).Vouch Unmarshal":            "a tool return's metadata.policycheck_receipt, a JSON string (the loader kept its bytes): the receipt's compact JWS",
	"engine/input.go convertContext NewDecoder":                        "the request context, a JSON object the operator sends",
	"engine/input.go convertContext Decode":                            "the request context",
	"facts/internal/jsonvalue/walk.go nestedJSON NewDecoder":           "a JSON object or array a string of a tool return's content spells, for the flow index",
	"facts/internal/jsonvalue/walk.go nestedJSON Decode":               "the same value",
	"facts/internal/jsonvalue/walk.go (*Walker).Walk NewDecoder":       "a tool return's content, the value a tool returned (the loader kept its bytes), for the flow index",
	"facts/internal/jsonvalue/walk.go (*Walker).Walk Decode":           "the same value",
	"internal/cli/bundle.go signingConfig Unmarshal":                   "build --claims-file, a JWT claims object",
	"internal/cli/inputs.go readContext NewDecoder":                    "--context, a JSON object",
	"internal/cli/inputs.go readContext Decode":                        "--context",
	"internal/conformance/conformance.go Load NewDecoder":              "a conformance case's file (its history is kept raw and read by the loader)",
	"internal/conformance/conformance.go Load Decode":                  "a conformance case",
	"server/internal/mask/mask.go Context NewDecoder":                  "a request context, for a decision log's masks",
	"server/internal/mask/mask.go Context Decode":                      "a request context",
	"server/internal/opaplugins/config.go encodedOptions Unmarshal":    "OPA's configuration, its top-level members",
	"server/internal/opaplugins/config.go checkLogBuffer Unmarshal":    "OPA's decision_logs reporting configuration",
	"server/internal/opaplugins/config.go BoundDecisionLogs Unmarshal": "OPA's decision_logs reporting configuration",
	"internal/output/replay/audit.go readRecorded Unmarshal":           "a decision-log record: its custom.policy_revision and result (the decision document)",
	"internal/output/replay/audit.go readRecorded NewDecoder":          "a decision-log record's custom.receipts and approval signatures",
	"internal/output/replay/inputs.go (*inputLoader).event NewDecoder": "a decision-log event (its input is the input document, facts not messages)",
	"internal/output/replay/inputs.go (*inputLoader).event Decode":     "a decision-log event",
	"server/declog.go (*Server).logEvent Unmarshal":                    "the decision, re-read as the decision log's value",
	"server/handlers.go parseRegistry Unmarshal":                       "a request's registry member given as a JSON string (YAML or JSON text)",
	"server/receipts.go (*Server).recordSignatures Unmarshal":          "the receipt keys a decision-log event records",
	"server/runs.go (*Server).handleRunDecide Unmarshal":               "a run step's offset and generation, whole numbers",
	"trust/approval.go (*ApprovalVerifier).check NewDecoder":           "a signed approval's JWS payload",
	"trust/approval.go (*ApprovalVerifier).check Decode":               "a signed approval's payload",
	"trust/digest.go canonicalOf NewDecoder":                           "a call's arguments or a context, for its canonical JSON",
	"trust/digest.go canonicalOf Decode":                               "the same value",
	"trust/receipt.go ParseCall NewDecoder":                            "a receipt's call claim",
	"trust/receipt.go ParseCall Decode":                                "a receipt's call claim",
	"trust/receiptverify.go Verify NewDecoder":                         "a receipt's JWS payload, its claims",
	"trust/receiptverify.go Verify Decode":                             "a receipt's claims",
	"trust/receiptverify.go Peek Unmarshal":                            "a receipt's claims, read before its key is known",
	"trust/receiptverify.go IDs Unmarshal":                             "a receipt's JWS header and claims, for their ids",
}

// TestOneReaderOfHistories holds "one reader per document" for the
// history: outside the loader, no production code decodes JSON with
// encoding/json but the decodes allowedDecodes lists, each of something
// that is not a history (a context, a receipt, a JWKS, a decision-log
// record, ...), and no decode, listed or not, has a history-shaped target
// (historyShaped). The way internal/caches' test refuses a second LRU,
// this refuses a second reader of histories: the explain page's own
// struct of messages, replay's split of a history into raw elements, the
// CLI's hint that decoded a history as a list of maps were three.
func TestOneReaderOfHistories(t *testing.T) {
	found := map[string][]jsonDecode{}
	for _, d := range jsonDecodes(t, "loader") {
		if d.target != nil && historyShaped(d.target) {
			t.Errorf("%s: %s decodes a %s, a history-shaped value, with encoding/json: the loader reads histories (loader.Reader, loader.DecodeTranscript), wire's skims sniff formats", d.pos, d.fn, types.ExprString(d.target))
		}
		found[d.key()] = append(found[d.key()], d)
	}
	var keys []string
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := allowedDecodes[k]; !ok {
			d := found[k][0]
			t.Errorf("%s: %s decodes JSON with encoding/json (%s), outside the loader: read a history with the loader, sniff a format with internal/ground/wire's skims, or, for a document that is not a history, add %q to allowedDecodes with why", d.pos, d.fn, d.call, k)
		}
	}
	for k := range allowedDecodes {
		if _, ok := found[k]; !ok {
			t.Errorf("allowedDecodes lists %q, which decodes nothing now: remove its line", k)
		}
	}
	if testing.Verbose() {
		for _, k := range keys {
			fmt.Println(k, found[k][0].pos)
		}
	}
}
