package render

import (
	"fmt"
	"html/template"
	"io"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/output/explainpage"
	"github.com/policycheck/policycheck/internal/output/replay"
)

// htmlRenderer writes a document as one self-contained HTML page (no
// script, nothing loaded): the explanation's page (internal/output/explainpage,
// which needs the Doc's Transcript) or the replay report's.
type htmlRenderer struct{}

func (htmlRenderer) Render(w io.Writer, d *Doc) error {
	v, err := d.section()
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case *engine.Explanation:
		return explainpage.Write(w, v, d.Transcript)
	case *replay.Report:
		return htmlReplay(w, v)
	}
	return noForm(HTML, v)
}

// short is a revision's first 19 characters, for the page.
func short(rev string) string {
	if len(rev) > 19 {
		return rev[:19]
	}
	return rev
}

// htmlReplay is replay --format html: the report as one self-contained
// HTML page (no external resources, no script): a summary, an inline SVG
// bar chart of the call transitions, the table of changes, and each run's
// changed steps, every change linked to its step by an anchor.
func htmlReplay(w io.Writer, r *replay.Report) error {
	type bar struct {
		replay.TransitionRow
		Y, Width int
	}
	type step struct {
		Anchor  string
		Message int
		Changes []replay.Change
	}
	type run struct {
		ID    string
		Steps []*step
	}
	rows := r.TransitionRows()
	most := 1
	for _, row := range rows {
		most = max(most, row.Count)
	}
	bars := make([]bar, len(rows))
	for i, row := range rows {
		bars[i] = bar{TransitionRow: row, Y: i * 26, Width: max(1, row.Count*400/most)}
	}
	var runs []*run
	for _, c := range r.Changes {
		if len(runs) == 0 || runs[len(runs)-1].ID != c.Run {
			runs = append(runs, &run{ID: c.Run})
		}
		rn := runs[len(runs)-1]
		if len(rn.Steps) == 0 || rn.Steps[len(rn.Steps)-1].Message != c.Message {
			rn.Steps = append(rn.Steps, &step{Anchor: c.Anchor(), Message: c.Message})
		}
		st := rn.Steps[len(rn.Steps)-1]
		st.Changes = append(st.Changes, c)
	}
	return htmlReport.Execute(w, map[string]any{
		"R": r, "Bars": bars, "ChartHeight": max(len(bars)*26, 26), "Runs": runs,
	})
}

var htmlReport = template.Must(template.New("report").Funcs(template.FuncMap{
	"id": func(s *string) string {
		if s == nil {
			return "(none)"
		}
		return *s
	},
	"short": short,
	"add":   func(a, b int) int { return a + b },
	"title": func(c replay.Change) string { return c.Headline() },
	"num":   func(n int) string { return fmt.Sprint(n) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>policycheck replay: {{len .R.Changes}} changes</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.changed{color:#a00;font-weight:600}code{font-size:.95em}
tr.loosening td.transition{color:#c00;font-weight:600}tr.tightening td.transition{color:#1a5fb4;font-weight:600}
.key-loosening{color:#c00;font-weight:600}.key-tightening{color:#1a5fb4;font-weight:600}
section.step{border-left:4px solid #a00;padding:.2em 1em;margin:1em 0}section.step:target{background:#fff6d5}
ul{margin:.2em 0}
</style>
</head>
<body>
<h1>policycheck replay</h1>
<section id="summary">
<h2>Summary</h2>
<table>
<tr><th>runs</th><td id="runs">{{.R.Runs}}</td></tr>
<tr><th>decisions per side</th><td id="decisions">{{.R.Decisions}}</td></tr>
<tr><th>calls judged</th><td id="calls">{{.R.Calls}}</td></tr>
<tr><th>baseline</th><td>{{range .R.Baseline.Policies}}<code>{{.}}</code> {{else}}(shipped defaults){{end}} revision <code>{{short .R.Baseline.PolicyRevision}}</code>{{if ne .R.Baseline.RegistryRevision .R.Candidate.RegistryRevision}}; registry <code>{{.R.Baseline.Registry}}</code> revision <code>{{short .R.Baseline.RegistryRevision}}</code>{{end}}</td></tr>
<tr><th>candidate</th><td>{{range .R.Candidate.Policies}}<code>{{.}}</code> {{else}}(shipped defaults){{end}} revision <code>{{short .R.Candidate.PolicyRevision}}</code>{{if ne .R.Baseline.RegistryRevision .R.Candidate.RegistryRevision}}; registry <code>{{.R.Candidate.Registry}}</code> revision <code>{{short .R.Candidate.RegistryRevision}}</code>{{end}}</td></tr>
{{with .R.RegistryChanges}}<tr><th>registry changes</th><td>{{range $i, $c := .}}{{if $i}}<br>{{end}}{{$c}}{{end}}</td></tr>{{end}}
<tr><th>available</th><td id="available">+{{.R.Available.Gained}} −{{.R.Available.Lost}}</td></tr>
<tr><th>advertised</th><td id="advertised">+{{.R.Advertised.Gained}} −{{.R.Advertised.Lost}}</td></tr>
<tr><th>fail-closed decisions</th><td id="fail-closed">baseline {{.R.FailClosed.Baseline}}, candidate {{.R.FailClosed.Candidate}}</td></tr>
<tr><th>changes</th><td id="change-count">{{len .R.Changes}}</td></tr>{{with .R.Audit}}
<tr><th>recorded receipts</th><td id="audit-receipts">{{.Receipts.Checked}} checked, {{.Receipts.Valid}} valid (keys: {{.ReceiptKeys}})</td></tr>
<tr><th>recorded approvals</th><td id="audit-approvals">{{.Approvals.Recorded}} recorded, {{.Approvals.RecordedRefused}} refused by the sidecar; {{.Approvals.Checked}} judged again, {{.Approvals.Verified}} verified; {{.Approvals.NotChecked}} not judged again</td></tr>
<tr><th>findings</th><td id="finding-count" class="{{if .Findings}}changed{{end}}">{{len .Findings}}</td></tr>{{end}}
</table>
<h2>Verdict transitions (baseline → candidate)</h2>
<table id="transitions">
<tr><th>transition</th><th>calls</th></tr>
{{range .Bars}}<tr class="transition{{if .Changed}} changed{{end}}" data-transition="{{.From}}->{{.To}}"><td>{{.From}} → {{.To}}</td><td class="count">{{.Count}}</td></tr>
{{end}}</table>
<svg id="chart" xmlns="http://www.w3.org/2000/svg" width="720" height="{{.ChartHeight}}" role="img" aria-label="call transitions">
{{range .Bars}}<g transform="translate(0,{{.Y}})"><text x="0" y="16" font-size="13">{{.From}} → {{.To}}</text><rect{{with .Direction}} class="{{.}}"{{end}} x="260" y="3" height="18" width="{{.Width}}" fill="{{if eq .Direction "loosening"}}#c00{{else if eq .Direction "tightening"}}#1a5fb4{{else if .Changed}}#b58900{{else}}#999{{end}}"><title>{{.From}} → {{.To}}: {{.Count}}</title></rect><text x="{{add .Width 266}}" y="16" font-size="13">{{.Count}}</text></g>
{{end}}</svg>
</section>
<section id="changes">
<h2>Changes</h2>
{{if .R.Changes}}<p id="direction-key"><span class="key-loosening">loosening</span>: toward execute; <span class="key-tightening">tightening</span>: away from it (<code>--fail-on loosening</code> fails on the first kind)</p>
<table>
<tr><th>run</th><th>message</th><th>kind</th><th>tool_call_id</th><th>tool</th><th>transition</th></tr>
{{range .R.Changes}}<tr class="change{{with .Direction}} {{.}}{{end}}"><td><a class="change-link" href="#{{.Anchor}}">{{.Run}}</a></td><td>{{.Message}}</td><td>{{.Kind}}</td><td>{{id .ToolCallID}}</td><td>{{.Tool}}</td><td class="transition">{{.Transition}}</td></tr>
{{end}}</table>{{else}}<p>No decision changes.</p>{{end}}
</section>
{{with .R.Audit}}{{if .Findings}}<section id="findings">
<h2>Findings: recorded receipts and approvals that do not verify</h2>
<table>
<tr><th>run</th><th>message</th><th>finding</th><th>source</th></tr>
{{range .Findings}}<tr class="finding"><td>{{.Run}}</td><td>{{.Message}}</td><td>{{.Headline}}</td><td>{{.Source}}</td></tr>
{{end}}</table>
</section>
{{end}}{{end}}<section id="runs-detail">
<h2>Runs</h2>
{{range .Runs}}<h3>{{.ID}}</h3>
{{range .Steps}}<section class="step" id="{{.Anchor}}">
<h4>message {{.Message}}</h4>
{{range .Changes}}<p><strong>{{title .}}</strong></p>
<ul><li>baseline: {{.Baseline.State}}{{range .Baseline.Reasons}}<br>reason: {{.}}{{end}}{{with .Baseline.Message}}<br>message: {{.}}{{end}}</li>
<li>candidate: {{.Candidate.State}}{{range .Candidate.Reasons}}<br>reason: {{.}}{{end}}{{with .Candidate.Message}}<br>message: {{.}}{{end}}</li></ul>
{{end}}</section>
{{end}}{{end}}
</section>
</body>
</html>
`))
