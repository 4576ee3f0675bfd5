package cli_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pageCheck is appended to a copy of the report (the report itself has
// no script): it reads the rendered page and writes what it found as
// JSON into the DOM, which --dump-dom then prints.
const pageCheck = `<script>
(() => {
  const out = {links: 0, broken: [], counts: {}, bars: 0, barWidths: 0, changeCount: ""};
  for (const a of document.querySelectorAll("a.change-link")) {
    out.links++;
    const id = decodeURIComponent(a.getAttribute("href").slice(1));
    const el = document.getElementById(id);
    if (!el || el.getBoundingClientRect().height <= 0) out.broken.push(id);
  }
  for (const tr of document.querySelectorAll("tr.transition")) {
    out.counts[tr.dataset.transition] = parseInt(tr.querySelector(".count").textContent, 10);
  }
  for (const r of document.querySelectorAll("#chart rect")) {
    out.bars++;
    if (r.getBBox().width > 0) out.barWidths++;
  }
  out.changeCount = document.getElementById("change-count").textContent;
  out.chartHeight = document.getElementById("chart").getBoundingClientRect().height;
  const pre = document.createElement("pre");
  pre.id = "page-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

// TestReplayHTMLReportInChromium loads the HTML report in headless
// Chromium: it renders, its transition table and chart show the report's
// counts, and every change's link resolves to its place in the run.
func TestReplayHTMLReportInChromium(t *testing.T) {
	t.Parallel() // in-process and in Chromium; slow, and independent of the other tests
	browser := headlessChromium(t)
	dir, rule, _ := replayCorpus(t)
	pols := filepath.Join(examplesDir, "policies")
	args := []string{"replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--baseline", pols,
		"--candidate", pols, "--candidate", rule, "--context", filepath.Join(examplesDir, "context", "support.json"), dir}
	code, page, errs := runCLI(append(args, "--format", "html")...)
	if code != 0 {
		t.Fatalf("replay --format html: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI(append(args, "--format", "json")...)
	if code != 0 {
		t.Fatalf("replay --format json: exit %d: %s", code, errs)
	}
	var rep struct {
		Transitions map[string]int
		Changes     []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, "<script") || regexp.MustCompile(`(src|href)="(https?:)?//`).MatchString(page) {
		t.Fatal("the report is not self-contained: it holds a script or an external resource")
	}

	var got struct {
		Links       int
		Broken      []string
		Counts      map[string]int
		Bars        int
		BarWidths   int
		ChangeCount string
		ChartHeight float64
	}
	checkInChromium(t, browser, page, pageCheck, &got)
	if got.Links != len(rep.Changes) || len(rep.Changes) == 0 {
		t.Errorf("%d change links, want one per change (%d)", got.Links, len(rep.Changes))
	}
	if len(got.Broken) > 0 {
		t.Errorf("links that resolve to no visible element: %v", got.Broken)
	}
	if !equalCounts(got.Counts, rep.Transitions) {
		t.Errorf("the page shows transitions %v, the report has %v", got.Counts, rep.Transitions)
	}
	if got.Bars != len(rep.Transitions) || got.BarWidths != got.Bars || got.ChartHeight <= 0 {
		t.Errorf("chart: %d bars (%d with width, height %v), want %d", got.Bars, got.BarWidths, got.ChartHeight, len(rep.Transitions))
	}
	if got.ChangeCount != itoa(len(rep.Changes)) {
		t.Errorf("the summary shows %q changes, want %d", got.ChangeCount, len(rep.Changes))
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
