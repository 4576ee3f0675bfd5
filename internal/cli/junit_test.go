package cli_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// The JUnit XML of test, check and replay (--format junit), read as CI
// reads it: unmarshalled into the structs below, and held to the schema
// checkJUnitSchema writes out.

type junitDoc struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Classname string         `xml:"classname,attr"`
	Name      string         `xml:"name,attr"`
	Skipped   *struct{}      `xml:"skipped"`
	Errors    []junitProblem `xml:"error"`
	Failures  []junitProblem `xml:"failure"`
	SystemOut string         `xml:"system-out"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// readJUnit checks out against the schema, in Go and with xmllint
// against testdata/junit.xsd, and unmarshals it.
func readJUnit(t *testing.T, out string) junitDoc {
	t.Helper()
	checkJUnitSchema(t, []byte(out))
	if err := validateJUnitXSD(t, []byte(out)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var doc junitDoc
	require.NoError(t, xml.Unmarshal([]byte(out), &doc), out)
	return doc
}

// cases returns the document's testcases by name.
func (d junitDoc) cases() map[string]junitCase {
	m := map[string]junitCase{}
	for _, s := range d.Suites {
		for _, c := range s.Cases {
			m[c.Name] = c
		}
	}
	return m
}

// xmlNode is any element, for the schema check.
type xmlNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []xmlNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n xmlNode) attr(name string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// xmlChar reports whether r is a Char of XML 1.0 (section 2.2).
func xmlChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

var xsdDecimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// checkJUnitSchema holds a document to the Jenkins JUnit XSD (junit-10.xsd
// of Jenkins' xunit plugin, the shape GitLab and GitHub's reporters read
// too), written out as checks, since Go's standard library validates no
// XSD:
//
//   - the bytes are UTF-8 XML 1.0 characters only, with an XML
//     declaration, and the document is well-formed;
//   - <testsuites> (attributes name, time, tests, failures, errors,
//     skipped, disabled) holds only <testsuite>;
//   - <testsuite> has name and tests (required) and failures, errors,
//     skipped, time; its children are properties? (one property or
//     more), testcase*, system-out?, system-err?, in that order; a
//     property has name and value;
//   - <testcase> has name (required) and, as we promise CI, classname
//     and time; its children are skipped?, error*, failure*, system-out*,
//     system-err*, in that order; error and failure have message and
//     type and hold text only;
//   - time is an xs:decimal, the counts are xs:int, and they are
//     consistent: a suite's tests is its number of testcases, failures
//     and errors its number of <failure> and <error>, skipped its number
//     of skipped testcases; the document's counts are the suites' sums.
func checkJUnitSchema(t testing.TB, raw []byte) {
	t.Helper()
	require.True(t, utf8.Valid(raw), "not UTF-8")
	for i, r := range string(raw) {
		if !xmlChar(r) {
			t.Fatalf("character %U at byte %d is not an XML 1.0 Char", r, i)
		}
	}
	require.True(t, bytes.HasPrefix(raw, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)), "no XML declaration: %.60q", raw)
	// Well-formed: the strict decoder reads every token.
	dec := xml.NewDecoder(bytes.NewReader(raw))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "not well-formed")
	}
	var root xmlNode
	require.NoError(t, xml.Unmarshal(raw, &root))

	attrs := func(n xmlNode, required []string, optional ...string) {
		t.Helper()
		allowed := map[string]bool{}
		for _, a := range append(required, optional...) {
			allowed[a] = true
		}
		for _, a := range n.Attrs {
			assert.True(t, allowed[a.Name.Local], "<%s> has attribute %s the schema does not allow", n.XMLName.Local, a.Name.Local)
		}
		for _, a := range required {
			_, ok := n.attr(a)
			assert.True(t, ok, "<%s> lacks the required attribute %s", n.XMLName.Local, a)
		}
		for _, a := range []string{"tests", "failures", "errors", "skipped", "disabled"} {
			if v, ok := n.attr(a); ok {
				_, err := strconv.Atoi(v)
				assert.NoError(t, err, "<%s %s=%q>", n.XMLName.Local, a, v)
			}
		}
		if v, ok := n.attr("time"); ok {
			assert.Regexp(t, xsdDecimal, v, "<%s time>", n.XMLName.Local)
		}
	}
	// order checks that children come in the order of names, each at most
	// once unless repeatable, and no other children.
	order := func(n xmlNode, names []string, repeatable map[string]bool) {
		t.Helper()
		at, count := 0, map[string]int{}
		for _, c := range n.Nodes {
			i := 0
			for i < len(names) && names[i] != c.XMLName.Local {
				i++
			}
			if !assert.Less(t, i, len(names), "<%s> holds <%s>, which the schema does not allow", n.XMLName.Local, c.XMLName.Local) {
				continue
			}
			assert.GreaterOrEqual(t, i, at, "<%s>: <%s> out of order", n.XMLName.Local, c.XMLName.Local)
			at = i
			count[c.XMLName.Local]++
			if !repeatable[c.XMLName.Local] {
				assert.LessOrEqual(t, count[c.XMLName.Local], 1, "<%s> holds more than one <%s>", n.XMLName.Local, c.XMLName.Local)
			}
		}
	}
	num := func(n xmlNode, a string) int {
		v, _ := n.attr(a)
		i, _ := strconv.Atoi(v)
		return i
	}

	require.Equal(t, "testsuites", root.XMLName.Local)
	attrs(root, nil, "name", "time", "tests", "failures", "errors", "skipped", "disabled")
	order(root, []string{"testsuite"}, map[string]bool{"testsuite": true})
	var sum [4]int
	for _, s := range root.Nodes {
		attrs(s, []string{"name", "tests"}, "failures", "errors", "skipped", "time", "timestamp", "hostname", "id", "package", "disabled")
		order(s, []string{"properties", "testcase", "system-out", "system-err"}, map[string]bool{"testcase": true})
		var got [4]int // tests, failures, errors, skipped
		for _, c := range s.Nodes {
			switch c.XMLName.Local {
			case "properties":
				assert.NotEmpty(t, c.Nodes, "<properties> holds no <property>")
				for _, p := range c.Nodes {
					assert.Equal(t, "property", p.XMLName.Local)
					attrs(p, []string{"name", "value"})
				}
			case "testcase":
				got[0]++
				attrs(c, []string{"name", "classname", "time"}, "assertions", "status")
				order(c, []string{"skipped", "error", "failure", "system-out", "system-err"},
					map[string]bool{"error": true, "failure": true, "system-out": true, "system-err": true})
				for _, e := range c.Nodes {
					switch e.XMLName.Local {
					case "failure", "error":
						attrs(e, nil, "message", "type")
						assert.Empty(t, e.Nodes, "<%s> holds elements", e.XMLName.Local)
						if e.XMLName.Local == "failure" {
							got[1]++
						} else {
							got[2]++
						}
					case "skipped":
						attrs(e, nil, "message")
						got[3]++
					}
				}
			}
		}
		name, _ := s.attr("name")
		assert.Equal(t, got, [4]int{num(s, "tests"), num(s, "failures"), num(s, "errors"), num(s, "skipped")},
			"testsuite %q: tests, failures, errors, skipped attributes against its testcases", name)
		for i := range sum {
			sum[i] += got[i]
		}
	}
	assert.Equal(t, sum, [4]int{num(root, "tests"), num(root, "failures"), num(root, "errors"), num(root, "skipped")},
		"testsuites: counts against the suites'")
}

// hostileXML is a string no XML document may hold as it is: markup, a CDATA
// end, quotes, and control characters XML 1.0 forbids.
const hostileXML = "a<b>&c\"d'e]]>\x01\x1b[31m\x7f"

// regoString is s as a Rego string literal (JSON's escapes).
func regoString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestTestJUnit(t *testing.T) {
	dir := policyFiles(t, map[string]string{
		"p/p.rego": "package p\n\nallow if input.ok\n\nf(x) := 1 if x\n\nf(x) := 2 if x\n",
		"p/p_test.rego": "package p\n\ntest_allow if allow with input as {\"ok\": true}\n\n" +
			"test_prints if {\n\tprint(" + regoString(hostileXML+"\u0000") + ")\n\tallow with input as {\"ok\": true}\n}\n",
	})
	code, out, stderr := policyRun(t, "test", dir, "--format", "junit")
	require.Equal(t, cli.ExitOK, code, stderr)
	doc := readJUnit(t, out)
	assert.Equal(t, [4]int{2, 0, 0, 0}, [4]int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped})
	require.Len(t, doc.Suites, 1)
	assert.Equal(t, "data.p", doc.Suites[0].Name)
	c := doc.cases()["test_prints"]
	assert.Equal(t, "data.p", c.Classname)
	// The print output is kept, its forbidden characters replaced.
	assert.Contains(t, c.SystemOut, "a<b>&c\"d'e]]>\uFFFD\uFFFD[31m\x7f\uFFFD")

	// Failing: a failure, an error and a todo test, exit 1 as in pretty.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p", "q_test.rego"), []byte(
		"package p\n\ntest_refuses if allow with input as {\"ok\": false}\n\ntest_conflict if f(true) == 1\n\ntodo_test_later if false\n"), 0o644))
	code, out, stderr = policyRun(t, "test", dir, "--format", "junit")
	require.Equal(t, cli.ExitFailed, code, stderr)
	doc = readJUnit(t, out)
	assert.Equal(t, [4]int{5, 1, 1, 1}, [4]int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped})
	cs := doc.cases()
	require.Len(t, cs["test_refuses"].Failures, 1)
	assert.Equal(t, "test failed: data.p.test_refuses", cs["test_refuses"].Failures[0].Message)
	assert.Contains(t, cs["test_refuses"].Failures[0].Text, "q_test.rego:3")
	require.Len(t, cs["test_conflict"].Errors, 1)
	assert.Contains(t, cs["test_conflict"].Errors[0].Message, "eval_conflict_error: function data.p.f produced conflicting values")
	assert.NotNil(t, cs["todo_test_later"].Skipped)

	// With coverage: a testsuite whose testcase fails below --threshold.
	code, out, _ = policyRun(t, "test", dir, "--format", "junit", "--run", "test_allow", "--threshold", "100")
	require.Equal(t, cli.ExitFailed, code)
	doc = readJUnit(t, out)
	require.Len(t, doc.Suites, 2)
	assert.Equal(t, "coverage", doc.Suites[1].Name)
	require.Len(t, doc.Suites[1].Cases[0].Failures, 1)
	assert.Contains(t, doc.Suites[1].Cases[0].Failures[0].Message, "is below the threshold 100.00%")

	code, _, stderr = policyRun(t, "test", dir, "--format", "xml")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stderr, `--format must be pretty, json or junit, not "xml"`)
}

func TestCheckJUnit(t *testing.T) {
	code, out, stderr := policyRun(t, "check", filepath.Join(examplesDir, "policies"), "--registry", filepath.Join(examplesDir, "registry.yaml"), "--format", "junit")
	require.Equal(t, cli.ExitOK, code, stderr)
	doc := readJUnit(t, out)
	assert.Zero(t, doc.Failures+doc.Errors+doc.Skipped)
	cs := doc.cases()
	assert.Contains(t, cs, filepath.Join(examplesDir, "registry.yaml"))
	assert.Equal(t, "check.registries", cs[filepath.Join(examplesDir, "registry.yaml")].Classname)
	policies := 0
	for name, c := range cs {
		if strings.HasSuffix(name, ".rego") {
			policies++
			assert.Equal(t, "check.policies", c.Classname, name)
		}
	}
	assert.GreaterOrEqual(t, policies, 3)

	// Failing: a hostileXML file name that does not parse, and no
	// --registry (the checks not run are skipped). Exit 2 as in pretty.
	dir := t.TempDir()
	bad := filepath.Join(dir, hostileXML+".rego")
	require.NoError(t, os.WriteFile(bad, []byte("package policycheck.rules.x\n\ndeny contains x if {\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.rego"), []byte("package policycheck.rules.y\n\ndeny contains \"y\" if input.call.tool == \"y\"\n"), 0o644))
	code, out, _ = policyRun(t, "check", dir, "--format", "junit")
	require.Equal(t, cli.ExitBadUsage, code)
	doc = readJUnit(t, out)
	assert.Equal(t, 1, doc.Failures)
	assert.Equal(t, 1, doc.Skipped)
	require.Contains(t, doc.cases(), "capability checks (no --registry)")
	cs = doc.cases()
	name := strings.NewReplacer("\x01", "\uFFFD", "\x1b", "\uFFFD").Replace(bad)
	require.Contains(t, cs, name, out)
	require.Len(t, cs[name].Failures, 1)
	assert.Equal(t, "rego_parse_error", cs[name].Failures[0].Type)
	assert.True(t, strings.HasPrefix(cs[name].Failures[0].Message, "rego_parse_error: "), cs[name].Failures[0].Message)
	assert.Empty(t, cs[filepath.Join(dir, "ok.rego")].Failures)

	code, _, stderr = policyRun(t, "check", dir, "--format", "tap")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stderr, `--format must be pretty, json or junit, not "tap"`)
}

func TestReplayJUnit(t *testing.T) {
	dir, rule, _ := replayCorpus(t)
	// A run whose name is hostileXML, with the refund the rule denies.
	raw, err := os.ReadFile(filepath.Join(dir, "refund-after-lookup.json"))
	require.NoError(t, err)
	hostileRun := filepath.Join(dir, hostileXML+".json")
	require.NoError(t, os.WriteFile(hostileRun, raw, 0o644))
	pols := filepath.Join(examplesDir, "policies")
	args := func(extra ...string) []string {
		return append([]string{"replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--baseline", pols,
			"--candidate", pols, "--candidate", rule, "--context", filepath.Join(examplesDir, "context", "support.json"), "--format", "junit", dir}, extra...)
	}

	// Passing: the changes are testcases, none failed without --fail-on.
	code, out, stderr := runCLI(args()...)
	require.Equal(t, cli.ExitOK, code, stderr)
	doc := readJUnit(t, out)
	assert.Equal(t, [4]int{5, 0, 0, 0}, [4]int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped}, out)
	cs := doc.cases()
	require.Contains(t, cs, "replayed")
	assert.Contains(t, cs["replayed"].SystemOut, ", 4 changed")

	// Failing: each change --fail-on counts is a failure; exit 1 as ever.
	code, out, stderr = runCLI(args("--fail-on", "execute->denied,*->fail_closed")...)
	require.Equal(t, cli.ExitFailed, code, stderr)
	doc = readJUnit(t, out)
	assert.Equal(t, [4]int{5, 4, 0, 0}, [4]int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped})
	var hostileCase *junitCase
	for _, c := range doc.Suites[0].Cases {
		if c.Name == "replayed" {
			continue
		}
		require.Len(t, c.Failures, 1, c.Name)
		f := c.Failures[0]
		assert.Equal(t, "execute->denied", f.Type)
		assert.True(t, strings.HasPrefix(f.Message, "--fail-on execute->denied: call "), f.Message)
		assert.Contains(t, f.Text, "refund above 40\n")
		if strings.Contains(c.Classname, "a<b>&c") {
			hostileCase = &c
		}
	}
	require.NotNil(t, hostileCase, "the hostileXML run's change")
	assert.Equal(t, strings.NewReplacer("\x01", "\uFFFD", "\x1b", "\uFFFD").Replace(hostileRun), hostileCase.Classname)

	// A transition the gate does not count passes.
	code, out, _ = runCLI(args("--fail-on", "denied->execute")...)
	require.Equal(t, cli.ExitOK, code)
	assert.Zero(t, readJUnit(t, out).Failures)

	// The preset loosening, on the reverse change (the candidate drops
	// the rule): each call it lets through again is a failure.
	code, out, _ = runCLI("replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--baseline", pols, "--baseline", rule,
		"--candidate", pols, "--context", filepath.Join(examplesDir, "context", "support.json"), "--format", "junit", "--fail-on", "loosening", dir)
	require.Equal(t, cli.ExitFailed, code)
	doc = readJUnit(t, out)
	assert.Equal(t, 4, doc.Failures)
	for _, c := range doc.Suites[0].Cases {
		for _, f := range c.Failures {
			assert.Equal(t, "denied->execute", f.Type)
			assert.True(t, strings.HasPrefix(f.Message, "--fail-on loosening: call "), f.Message)
		}
	}

	code, _, stderr = runCLI(args("--format", "yaml")...)
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Contains(t, stderr, `--format must be pretty, json, html or junit, not "yaml"`)
}

// TestJUnitSchemaCheckerRejects: the schema check fails documents that
// break it (its cases are run on a recorder, not on t).
func TestJUnitSchemaCheckerRejects(t *testing.T) {
	const head = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	for name, doc := range map[string]string{
		"tests miscounted":    `<testsuites tests="2" failures="0" errors="0" skipped="0"><testsuite name="s" tests="2" failures="0" errors="0" skipped="0"><testcase classname="c" name="n" time="0"/></testsuite></testsuites>`,
		"failures miscounted": `<testsuites tests="1" failures="0" errors="0" skipped="0"><testsuite name="s" tests="1" failures="0" errors="0" skipped="0"><testcase classname="c" name="n" time="0"><failure message="m" type="t">x</failure></testcase></testsuite></testsuites>`,
		"no suite name":       `<testsuites tests="0"><testsuite tests="0"></testsuite></testsuites>`,
		"out of order":        `<testsuites tests="1" failures="1" errors="0" skipped="0"><testsuite name="s" tests="1" failures="1" errors="0" skipped="0"><testcase classname="c" name="n" time="0"><system-out>o</system-out><failure message="m" type="t">x</failure></testcase></testsuite></testsuites>`,
		"control character":   "<testsuites tests=\"0\"><testsuite name=\"\x01\" tests=\"0\"></testsuite></testsuites>",
		"empty properties":    `<testsuites tests="0"><testsuite name="s" tests="0"><properties></properties></testsuite></testsuites>`,
		"bad time":            `<testsuites tests="0" time="1s"></testsuites>`,
	} {
		rec := &recorder{TB: t}
		func() {
			defer func() { _ = recover() }() // FailNow's stand-in
			checkJUnitSchema(rec, []byte(head+doc))
		}()
		assert.True(t, rec.failed, "%s: the schema check passed it", name)
	}
}

// recorder is a testing.TB whose failures are recorded, not reported.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic("fatal") }
func (r *recorder) FailNow()              { r.failed = true; panic("FailNow") }
func (r *recorder) Helper()               {}

// TestReplayJUnitDocExample runs the replay docs/replay.md shows as JUnit
// XML (its ```console junit block), from the module root: it exits 1 (the
// gate matched), prints what the doc shows, and the document holds to
// the schema. Policy revisions, digests of the policy files, are compared
// as digests only.
func TestReplayJUnitDocExample(t *testing.T) {
	revision := regexp.MustCompile(`value="[0-9a-f]{64}"`)
	examples := 0
	for _, ex := range replayDocExamples(t, "```console junit\n") {
		examples++
		args := strings.Fields(ex.cmdline)
		for i, a := range args {
			args[i] = strings.Trim(a, "'")
		}
		code, out, errs := runCLI(args...)
		assert.Equal(t, cli.ExitFailed, code, errs)
		assert.Contains(t, errs, "--fail-on matched: execute->approval_required (1)")
		doc := readJUnit(t, out)
		assert.Equal(t, 1, doc.Failures)
		want := revision.ReplaceAllString(ex.want, `value="<digest>"`)
		assert.Equal(t, want, revision.ReplaceAllString(out, `value="<digest>"`), "docs/replay.md shows the output of %s", ex.cmdline)
	}
	require.Equal(t, 1, examples, "docs/replay.md's --format junit example")
}

// junitXSD is the JUnit schema the documents are validated against,
// found beside this file (a test may have changed directory).
func junitXSD(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok, "no caller")
	return filepath.Join(filepath.Dir(file), "testdata", "junit.xsd")
}

// validateJUnitXSD validates raw against testdata/junit.xsd with xmllint and
// returns what xmllint said when it does not validate. Outside CI a
// machine without xmllint skips this check with a note (the Go checks
// still run); under CI=true scripts/test.sh installs Debian's
// libxml2-utils and its absence fails the test.
func validateJUnitXSD(t *testing.T, raw []byte) error {
	t.Helper()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no xmllint is installed: scripts/test.sh installs Debian's libxml2-utils")
		}
		t.Log("note: no xmllint (apt-get install -y libxml2-utils): the JUnit XML is not validated against testdata/junit.xsd")
		return nil
	}
	xsd := junitXSD(t)
	cmd := exec.Command(xmllint, "--noout", "--nonet", "--schema", xsd, "-")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("xmllint --schema %s: %v: %s", xsd, err, out)
	}
	return nil
}

// TestJUnitXSDRejects: the schema the documents are validated against
// refuses documents a CI system would misread: a suite without a name, a
// testcase without a classname, its parts out of order, a count or a time
// that is not a number, an empty properties element, an element JUnit does
// not have.
func TestJUnitXSDRejects(t *testing.T) {
	if _, err := exec.LookPath("xmllint"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("no xmllint (apt-get install -y libxml2-utils)")
	}
	const head = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	good := `<testsuites tests="1" failures="1" errors="0" skipped="0" time="0.001"><testsuite name="s" tests="1" failures="1" errors="0" skipped="0" time="0.001"><testcase classname="c" name="n" time="0.001"><failure message="m" type="t">x</failure><system-out>o</system-out></testcase></testsuite></testsuites>`
	require.NoError(t, validateJUnitXSD(t, []byte(head+good)), "the well-formed document")
	for name, doc := range map[string]string{
		"no suite name":      `<testsuites tests="0"><testsuite tests="0"></testsuite></testsuites>`,
		"no classname":       `<testsuites tests="1"><testsuite name="s" tests="1"><testcase name="n"/></testsuite></testsuites>`,
		"out of order":       `<testsuites tests="1"><testsuite name="s" tests="1"><testcase classname="c" name="n"><system-out>o</system-out><failure message="m" type="t">x</failure></testcase></testsuite></testsuites>`,
		"count not a number": `<testsuites tests="one"></testsuites>`,
		"bad time":           `<testsuites tests="0" time="1s"></testsuites>`,
		"empty properties":   `<testsuites tests="0"><testsuite name="s" tests="0"><properties></properties></testsuite></testsuites>`,
		"unknown element":    `<testsuites tests="0"><testsuite name="s" tests="0"><result/></testsuite></testsuites>`,
	} {
		assert.Error(t, validateJUnitXSD(t, []byte(head+doc)), "%s: the schema took it", name)
	}
}
