package docs_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

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
