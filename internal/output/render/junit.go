package render

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/policycheck/policycheck/internal/output/replay"
)

// The JUnit XML document test, check and replay write with --format
// junit, in the shape Jenkins, GitLab and GitHub's test reporters read
// (the Jenkins JUnit XSD, junit-10.xsd of the xunit plugin):
// <testsuites> holding <testsuite name tests failures errors skipped
// time>, each holding <testcase classname name time> with <skipped/>,
// <error>, <failure message type> and <system-out> in that order. The
// counts of the suites and of the document are computed when it is
// written, from the cases: tests is the number of testcases, failures
// and errors the number of <failure> and <error> elements, skipped the
// number of skipped testcases.
//
// encoding/xml escapes every string; a character XML 1.0 forbids (the
// C0 controls but tab, newline and carriage return, U+FFFE, U+FFFF, and
// bytes that are not UTF-8) is written as U+FFFD, so a test name or
// message cannot make the document unreadable.

// JUnitSuites is a JUnit XML document: test and check build one, the
// junit renderer writes it (and builds replay's from its report).
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr,omitempty"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one <testsuite>.
type JUnitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Time       string           `xml:"time,attr"`
	Properties *JUnitProperties `xml:"properties"`
	Cases      []JUnitCase      `xml:"testcase"`
}

// JUnitProperties are a suite's properties (at least one).
type JUnitProperties struct {
	Property []JUnitProperty `xml:"property"`
}

// JUnitProperty is a suite's name=value property.
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitCase is one <testcase>: it passed unless it holds a failure or an
// error, or was skipped.
type JUnitCase struct {
	Classname string         `xml:"classname,attr"`
	Name      string         `xml:"name,attr"`
	Time      string         `xml:"time,attr"`
	Skipped   *JUnitSkipped  `xml:"skipped"`
	Errors    []JUnitProblem `xml:"error"`
	Failures  []JUnitProblem `xml:"failure"`
	SystemOut string         `xml:"system-out,omitempty"`
	// Duration is written as time.
	Duration time.Duration `xml:"-"`
}

// JUnitSkipped marks a skipped testcase.
type JUnitSkipped struct {
	Message string `xml:"message,attr,omitempty"`
}

// JUnitProblem is a <failure> or an <error>: its message in one line,
// its type, and the detail as text.
type JUnitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// seconds is a duration as JUnit's time attribute writes it.
func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// complete fills in the counts and times of the suites and the document
// from their cases.
func (s *JUnitSuites) complete() {
	s.Tests, s.Failures, s.Errors, s.Skipped = 0, 0, 0, 0
	var total time.Duration
	for i := range s.Suites {
		su := &s.Suites[i]
		su.Tests, su.Failures, su.Errors, su.Skipped = len(su.Cases), 0, 0, 0
		var d time.Duration
		for j := range su.Cases {
			c := &su.Cases[j]
			c.Time = seconds(c.Duration)
			d += c.Duration
			su.Failures += len(c.Failures)
			su.Errors += len(c.Errors)
			if c.Skipped != nil {
				su.Skipped++
			}
		}
		su.Time = seconds(d)
		total += d
		s.Tests += su.Tests
		s.Failures += su.Failures
		s.Errors += su.Errors
		s.Skipped += su.Skipped
	}
	s.Time = seconds(total)
}

// junitRenderer writes a document's JUnit XML: its Suites, or a replay's
// report judged by the document's FailOn.
type junitRenderer struct{}

func (junitRenderer) Render(w io.Writer, d *Doc) error {
	v, err := d.section()
	if err != nil {
		return err
	}
	var s *JUnitSuites
	switch v := v.(type) {
	case *JUnitSuites:
		s = v
	case *replay.Report:
		s = replaySuites(v, d.FailOn)
	default:
		return noForm(JUnit, v)
	}
	s.complete()
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("render: junit: %w", err)
	}
	buf.WriteByte('\n')
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// replaySuites is a replay's report as one suite: a testcase per change
// (classname its run), failed when gate counts its transition as failing;
// a testcase per recorded receipt or approval signature that did not
// verify, always failed (it fails the replay); and a first testcase for
// the decisions and calls replayed, which passes.
func replaySuites(r *replay.Report, gate *replay.Gate) *JUnitSuites {
	su := JUnitSuite{Name: "policycheck replay", Properties: &JUnitProperties{Property: []JUnitProperty{
		{"baseline.policies", policies(r.Baseline.Policies)},
		{"baseline.policy_revision", r.Baseline.PolicyRevision},
		{"candidate.policies", policies(r.Candidate.Policies)},
		{"candidate.policy_revision", r.Candidate.PolicyRevision},
		{"runs", fmt.Sprint(r.Runs)},
		{"decisions", fmt.Sprint(r.Decisions)},
		{"calls", fmt.Sprint(r.Calls)},
	}}}
	su.Cases = append(su.Cases, JUnitCase{Classname: "replay", Name: "replayed",
		SystemOut: fmt.Sprintf("%d runs, %d decisions and %d calls replayed on each side, %d changed\n", r.Runs, r.Decisions, r.Calls, len(r.Changes))})
	for i := range r.Changes {
		c := &r.Changes[i]
		var detail strings.Builder
		side := func(name string, o replay.Outcome) {
			fmt.Fprintf(&detail, "%s: %s\n", name, o.State)
			if o.Message != "" {
				fmt.Fprintf(&detail, "  message: %s\n", o.Message)
			}
			for _, why := range o.Reasons {
				fmt.Fprintf(&detail, "  reason: %s\n", why)
			}
		}
		side("baseline", c.Baseline)
		side("candidate", c.Candidate)
		tc := JUnitCase{Classname: c.Run, Name: fmt.Sprintf("message %d: %s", c.Message, c.Headline())}
		if p := gate.Match(c); p != "" {
			tc.Failures = []JUnitProblem{{Message: fmt.Sprintf("--fail-on %s: %s", p, c.Headline()), Type: c.Transition, Text: detail.String()}}
		} else {
			tc.SystemOut = detail.String()
		}
		su.Cases = append(su.Cases, tc)
	}
	if r.Audit != nil {
		for _, f := range r.Audit.Findings {
			su.Cases = append(su.Cases, JUnitCase{Classname: f.Run, Name: fmt.Sprintf("message %d: recorded %s", f.Message, f.Kind),
				Failures: []JUnitProblem{{Message: f.Headline(), Type: f.Kind, Text: f.Headline() + "\n"}}})
		}
	}
	return &JUnitSuites{Name: "policycheck replay", Suites: []JUnitSuite{su}}
}

// policies names a side's policy paths, as the pretty report does.
func policies(paths []string) string {
	if len(paths) == 0 {
		return "(shipped defaults)"
	}
	return strings.Join(paths, " ")
}
