package explainpage

import (
	"html/template"

	"github.com/policycheck/policycheck/engine"
)

// verdictClass maps a verdict to its CSS class; an input string never
// becomes a class name.
func verdictClass(v string) string {
	switch v {
	case engine.Execute:
		return "v-execute"
	case engine.NotAvailableYet:
		return "v-not-available-yet"
	case engine.UnknownTool:
		return "v-unknown-tool"
	case engine.Denied:
		return "v-denied"
	}
	return "v-other"
}

func kindClass(k string) string {
	switch k {
	case "tool-call", "builtin-tool-call":
		return "k-call"
	case "tool-return", "builtin-tool-return":
		return "k-return"
	case "compaction":
		return "k-compaction"
	case "tool-availability-delta":
		return "k-delta"
	case "user-prompt", "system-prompt":
		return "k-prompt"
	}
	return "k-other"
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"v":      func(s string) string { return Visible(s, false) },
	"vb":     func(s string) string { return Visible(s, true) },
	"vclass": verdictClass,
	"kclass": kindClass,
	"foldAt": func() int { return FoldAt },
	"deref":  func(b *bool) bool { return b != nil && *b },
	"bptr": func(b *bool) string {
		if b == nil {
			return ""
		}
		if *b {
			return "true"
		}
		return "false"
	},
	"yes": func(b bool, yes, no string) string {
		if b {
			return yes
		}
		return no
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="` + CSP + `">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>policycheck explain: {{.Messages}} messages, {{len .Calls}} calls</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:90em}
table{border-collapse:collapse;margin:.6em 0;width:100%}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top;overflow-wrap:break-word;word-break:normal;hyphens:none}
.token{overflow-wrap:anywhere}.msg-text,.call-why li{white-space:pre-wrap}.told{font-style:italic;color:#555}.call-rule p{margin:0 0 .3em 0}.call-rule p.applied{color:#666;font-size:.9em}
th{background:#f3f3f3}code,pre{font-family:ui-monospace,monospace;font-size:.9em}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0 .3em 2em;background:#f8f8f8;padding:.4em}
ul{margin:.2em 0;padding-left:1.2em}
.failed{color:#a00;font-weight:700}
.v-execute{color:#060;font-weight:600}.v-not-available-yet{color:#a60;font-weight:600}.v-unknown-tool,.v-denied,.v-other{color:#a00;font-weight:600}
.yes{color:#060}.no{color:#a00}
.msg{border-top:1px solid #ddd;padding:.2em 0;content-visibility:auto;contain-intrinsic-size:auto 4em}
.msg h3{font-size:.95em;margin:.3em 0;font-weight:600}
.msg.response h3{color:#246}.msg.dispatched{background:#f4f8ff}
.part{position:relative;padding:.1em 0 .1em 2.2em;scroll-margin-top:3em}
.part::before,.part::after{content:"";position:absolute;top:0;bottom:0;width:.55em}
.part::before{left:0}.part::after{left:.75em}
.part.in-cons::before{background:#4a7bd0}.part.in-disp::after{background:#3a9a5a}
p.line{margin:0;padding-left:1.1em}
.kind{display:inline-block;min-width:11em;font-family:ui-monospace,monospace;font-size:.85em;color:#555}
.k-call .kind{color:#246}.k-return .kind{color:#264}.k-compaction .kind{color:#a00;font-weight:700}.k-delta .kind{color:#850}
.first{color:#444}.cid{color:#777;font-size:.85em}
.mark{display:inline-block;margin:0 .2em;padding:0 .4em;border-radius:.6em;font-size:.85em;border:1px solid}
.mark.reveal{background:#e6f0ff;border-color:#4a7bd0}.mark.load-call,.mark.load-return{background:#e8f6ec;border-color:#3a9a5a}
.mark.hides{background:#fde8e8;border-color:#a00}.mark.near-miss{background:#f3f3f3;border-color:#888;border-style:dashed}.mark.delta{background:#fff4e0;border-color:#b80}.mark[data-in-window="false"]{text-decoration:line-through}
.boundary{margin:.3em 0 .1em 0;padding:.1em .5em;font-weight:600;font-size:.9em}
.b-conservative{border-top:3px solid #4a7bd0;color:#2a5bb0}.b-dispatch{border-top:3px dashed #3a9a5a;color:#2a7a4a}
.k-compaction{background:#fff0f0}
.fold{margin:.3em 0 .3em 2.2em;color:#555}.fold>summary{cursor:pointer;font-style:italic}
.legend span{margin-right:1.5em}.sw{display:inline-block;width:.8em;height:1em;vertical-align:middle;margin-right:.3em}
tr.tool:target{background:#fff3d6}
{{range .ToolIdx}}body:has(#tool-{{.}}:target) .t{{.}}{outline:3px solid #d80;background:#fff3d6}
{{end}}</style>
</head>
<body>
<h1>policycheck explain</h1>
<p><a href="#calls">calls</a> · <a href="#tools">tools</a> · <a href="#timeline">timeline</a> · <a href="#policies">policies</a></p>
<section id="summary">
{{range .Errors}}<p class="failed">FAILED CLOSED: {{v .}}</p>
{{end}}<table>
<tr><th>messages</th><td id="message-count">{{.Messages}}</td></tr>
<tr><th>window (next request)</th><td id="window-text">{{v .X.Window}}</td></tr>
{{if .Disp}}<tr><th>dispatch</th><td id="dispatch-text">{{v .X.Dispatch}}</td></tr>
{{end}}<tr><th>active capabilities</th><td>{{range $i, $c := .X.Decision.Facts.ActiveCapabilities}}{{if $i}}, {{end}}{{v $c}}{{else}}(none){{end}}{{with .X.Decision.Dispatch}}; at dispatch: {{range $i, $c := .ActiveCapabilities}}{{if $i}}, {{end}}{{v $c}}{{else}}(none){{end}}{{end}}</td></tr>
<tr><th>framework tools available</th><td>{{range $i, $c := .Framework}}{{if $i}}, {{end}}{{v $c}}{{else}}(none){{end}}</td></tr>
<tr><th>filter-cache fingerprint</th><td><code class="token">{{v .X.Decision.Fingerprint}}</code></td></tr>
{{if .Folded}}<tr><th>folded</th><td id="folded">{{.Folded}} messages in runs of at least {{foldAt}} with no reveal, load or compaction</td></tr>
{{end}}</table>
</section>
<section id="calls">
<h2>Calls of the dispatched response</h2>
{{if .Calls}}<table>
<tr><th>call</th><th>tool</th><th>verdict</th><th>message</th><th>decided by</th><th>why</th><th>what would have made it callable</th></tr>
{{range .Calls}}<tr class="call"><td class="call-id"><a href="#{{.Anchor}}">{{if .HasID}}{{v .ID}}{{else}}(no id){{end}}</a></td><td class="call-tool"><code>{{v .C.Tool}}</code></td><td class="call-verdict {{vclass .C.Verdict}}">{{v .C.Verdict}}</td><td class="call-message">{{if .C.Message}}<span class="told">{{if .Asked}}the approver is asked{{else}}the model is told{{end}}:</span> <span class="msg-text">{{vb .C.Message}}</span>{{end}}{{if .Args}}<br>arguments: <code class="token">{{v .Args}}</code>{{end}}{{with .C.Digest}}<br>digest: <code class="token">{{v .}}</code>{{end}}</td><td class="call-rule">{{$ds := .C.Deciders}}{{range $ds}}<p class="decider" data-kind="{{.Kind}}">{{.Kind}} <code>{{v .Name}}</code>{{with .Location}}<br><code class="token">{{v .}}</code>{{end}}</p>{{end}}{{with .C.DecidedBy}}<p class="applied">{{if $ds}}applied by {{end}}<code>{{v .Package}}.{{v .Rule}}</code><br><code class="token">{{v .Location}}</code></p>{{else}}the engine{{if not .C.Deciders}} (failed closed){{end}}{{end}}</td><td class="call-why"><ul>{{range .C.Why}}<li>{{vb .}}</li>{{end}}{{range .C.WouldDeny}}<li>would deny (log-only rule, not enforced): {{v .}}</li>{{end}}</ul></td><td class="call-remedy">{{with .Remedy}}{{.}}{{else}}(callable){{end}}</td></tr>
{{end}}</table>
{{else}}<p>The last message is not a response with tool calls: no call is judged.</p>
{{end}}{{if .Approvals}}<h3>Approvals</h3><ul>{{range .Approvals}}<li>{{v .ToolCallID}} {{v .Kind}} by {{range $i, $a := .Approvers}}{{if $i}}, {{end}}{{v $a}}{{end}}: {{v .Why}}</li>{{end}}</ul>
{{end}}{{with .X.Decision.UnverifiedEvidence}}<h3>Unverified evidence, ignored</h3><ul class="unverified">{{range .}}<li>message {{.Message}}, part {{.Part}}: {{v .Why}}</li>{{end}}</ul>
{{end}}</section>
{{with .X.NearMisses}}<section id="near-misses">
<h2>Near misses: parts that look like a search or a load but do not count</h2>
<ul>{{range .}}<li class="near-miss" data-message="{{.At.Message}}" data-part="{{.At.Part}}"><a href="#m{{.At.Message}}p{{.At.Part}}">{{v .Why}}</a></li>{{end}}</ul>
</section>
{{end}}<section id="tools">
<h2>Tools of the registry</h2>
<p>Select a tool to highlight, in the timeline, the parts that revealed, loaded or hid it and the calls of it.</p>
<table>
<tr><th>tool</th><th>available</th><th>advertised</th><th>callable at dispatch</th><th>story</th></tr>
{{range .Tools}}<tr class="tool" id="tool-{{.Index}}"><td><a class="tool-link" href="#tool-{{.Index}}"><code>{{v .T.Name}}</code></a></td><td class="{{yes .T.Available "yes" "no"}}">{{yes .T.Available "yes" "no"}}</td><td class="{{yes .T.Advertised "yes" "no"}}">{{yes .T.Advertised "yes" "no"}}</td><td>{{if .HasDispatch}}{{if deref .T.DispatchAvailable}}<span class="yes">yes</span>{{else}}<span class="no">no</span>{{end}}{{else}}(no dispatch){{end}}</td><td><ul>{{range .T.Why}}<li>{{v .}}</li>{{end}}{{if .WouldHide}}<li>would hide (log-only rule, not enforced)</li>{{end}}{{range .Marks}}<li><a href="#{{.Anchor}}">{{v .Text}}</a></li>{{end}}</ul></td></tr>
{{end}}</table>
</section>
<section id="timeline">
<h2>The conversation</h2>
<p class="legend"><span><span class="sw" style="background:#4a7bd0"></span>conservative window (what the next request counts)</span>{{if .Disp}}<span><span class="sw" style="background:#3a9a5a"></span>dispatch window ({{with .Disp.Provider}}what {{v .}} saw{{else}}no provider: the conservative window{{end}})</span>{{end}}<span>struck-through marks lie before the window</span></p>
{{range .Items}}{{if .Fold}}<details class="fold" data-from="{{.Fold.From}}" data-to="{{.Fold.To}}"><summary>messages {{.Fold.From}}–{{.Fold.To}}: {{.Fold.N}} messages with no reveal, load or compaction</summary>
{{range .Fold.Msgs}}{{template "msg" .}}{{end}}</details>
{{else}}{{template "msg" .Msg}}{{end}}{{end}}</section>
<section id="policies">
<h2>Policies</h2>
<ul>{{range .Policies}}<li><code>{{v .File}}</code> ({{v .Package}}): {{v .Role}}</li>{{end}}</ul>
</section>
</body>
</html>
{{define "msg"}}<section class="msg {{if eq .Kind "response"}}response{{else}}request{{end}}{{if .Dispatch}} dispatched{{end}}" id="m{{.Index}}" data-message="{{.Index}}">
<h3>#{{.Index}} {{v .Kind}}{{with .Provider}} · provider {{v .}}{{end}}{{with .Model}} · model {{v .}}{{end}}{{if .Dispatch}} · the dispatched response{{end}}</h3>
{{range .Parts}}{{template "part" .}}{{end}}</section>
{{end}}{{define "part"}}{{range .Boundaries}}<div class="boundary b-{{.Name}}" id="window-{{.Name}}" data-message="{{.At.Message}}" data-part="{{.At.Part}}" data-provider="{{v .Provider}}">{{if eq .Name "conservative"}}conservative window starts here{{if .Whole}} (the whole history){{end}}{{else}}dispatch window{{with .Provider}} of {{v .}}{{end}} starts here{{if .Whole}} (the whole history){{end}}{{end}}</div>
{{end}}<div class="part {{kclass .Kind}}{{if .InCons}} in-cons{{end}}{{if .InDisp}} in-disp{{end}}{{range .Tools}} t{{.}}{{end}}" id="m{{.Message}}p{{.Index}}" data-message="{{.Message}}" data-part="{{.Index}}">{{if .Body}}<details><summary>{{template "line" .}}</summary>
<pre>{{vb .Body}}</pre>{{if .More}}<p>… {{.More}} more bytes not shown</p>{{end}}</details>{{else}}<p class="line">{{template "line" .}}</p>{{end}}</div>
{{end}}{{define "line"}}<span class="kind">{{v .Kind}}</span>{{with .Name}} <code class="part-tool">{{v .}}</code>{{end}}{{with .CallID}} <span class="cid">id {{v .}}</span>{{end}}{{with .Verdict}} <span class="part-verdict {{vclass .}}">→ {{v .}}</span>{{end}} <span class="first">{{v .First}}</span>{{range .Marks}} <span class="mark {{.Class}}" data-tool="{{v .Tool}}"{{if ne .Name .Tool}} data-name="{{v .Name}}"{{end}}{{with .Kind}} data-kind="{{v .}}"{{end}} data-in-window="{{.InWindow}}"{{with bptr .InDispatch}} data-in-dispatch-window="{{.}}"{{end}}{{if eq .Class "load-return"}} data-call-message="{{.Call.Message}}" data-call-part="{{.Call.Part}}"{{end}}>{{v .Text}}</span>{{end}}{{end}}`))
