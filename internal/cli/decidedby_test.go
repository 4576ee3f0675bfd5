package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalPrettyNamesTheApprover: eval --format pretty labels an
// approval_required call's message as the approver's, as explain does,
// and prints what became of each approval and why.
func TestEvalPrettyNamesTheApprover(t *testing.T) {
	args := []string{"eval", "--format", "pretty", "--registry", filepath.Join(examplesDir, "registry.yaml"),
		"--history", filepath.Join(examplesDir, "histories", "transfer.json"), "--policy", filepath.Join(examplesDir, "policies", "transfers")}
	res := run(t, "", args...)
	if res.code != 0 || !strings.Contains(res.stdout, "\n      approver is asked: Approve a transfer of 5000 from ops to savings?\n") ||
		strings.Contains(res.stdout, "model is told: Approve") {
		t.Errorf("eval --format pretty: exit %d, does not say the approver is asked:\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, "", append(args, "--approvals", filepath.Join(examplesDir, "approvals", "transfer.json"))...)
	if want := "\nApprovals (1):\n  t2 tool-approved by ana: applied: approved by ana; the call executes with the approver's override_args\n"; res.code != 0 || !strings.Contains(res.stdout, want) {
		t.Errorf("eval --format pretty --approvals: exit %d, lacks %q:\n%s%s", res.code, want, res.stdout, res.stderr)
	}
}

// callRuleCell returns the "decided by" cell of the page's call row of
// tool_call_id id.
func callRuleCell(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<tr class="call"><td class="call-id"><a href="#`)
	for i >= 0 {
		row := page[i:]
		end := strings.Index(row, "</tr>")
		row = row[:end]
		if strings.Contains(row, ">"+id+"</a>") {
			start := strings.Index(row, `<td class="call-rule">`)
			return row[start : start+strings.Index(row[start:], "</td>")]
		}
		next := strings.Index(page[i+1:], `<tr class="call">`)
		if next < 0 {
			break
		}
		i += 1 + next
	}
	t.Fatalf("no call row %q on the page", id)
	return ""
}

// TestExplainPageNamesTheOperatorsDecider: the page's "decided by" names
// the operator's deny, hide or require_approval rule, filter, or the
// registry's schema, first, and the shipped rule that applied it after.
func TestExplainPageNamesTheOperatorsDecider(t *testing.T) {
	reg := filepath.Join(examplesDir, "registry.yaml")
	_, refund := explainBoth(t, "--registry", reg, "--policy", filepath.Join(examplesDir, "policies"),
		"--context", filepath.Join(examplesDir, "context", "support.json"), "--history", filepath.Join(examplesDir, "histories", "refund.json"))
	_, transfer := explainBoth(t, "--registry", reg, "--policy", filepath.Join(examplesDir, "policies", "transfers"),
		"--history", filepath.Join(examplesDir, "histories", "transfer.json"))
	dir := t.TempDir()
	schemaReg := writeFile(t, dir, "registry.yaml", "tools:\n  - name: get_time\n    parameters_json_schema:\n      type: object\n      properties:\n        tz: {type: string}\n")
	history := writeFile(t, dir, "history.json", `[{"kind":"request","parts":[`+userPrompt+`]},
 {"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_time","tool_call_id":"c1","args":{"tz":5}}]}]`)
	_, schema := explainBoth(t, "--registry", schemaReg, "--history", history)
	// The vault filter drops rotate_key outside the admin group.
	vaultReg := writeFile(t, dir, "vault.yaml", "capabilities:\n  - id: vault\ntools:\n  - name: get_time\n  - name: rotate_key\n    capability: vault\n")
	rotate := writeFile(t, dir, "rotate.json", `[{"kind":"request","parts":[`+userPrompt+`]},
 {"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"rotate_key","tool_call_id":"c1","args":{}}]}]`)
	_, filter := explainBoth(t, "--registry", vaultReg, "--history", rotate, "--policy", filepath.Join(examplesDir, "policies", "vault"),
		"--context", filepath.Join(examplesDir, "context", "support.json"))
	for _, c := range []struct{ page, id, first, loc, after string }{
		{refund, "c2", `<p class="decider" data-kind="deny">deny <code>policycheck.rules.sequence.deny</code><br><code class="token">`, "policies/sequence/sequence.rego:19:1</code>", "availability.rego"},
		{refund, "c4", `hide <code>policycheck.rules.groups.hide</code><br><code class="token">`, "policies/groups/groups.rego:28:1</code>", "gate.rego"},
		{transfer, "t2", `require_approval <code>policycheck.rules.transfers.require_approval</code>`, "transfers.rego:", "availability.rego"},
		{filter, "c1", `filter <code>policycheck.capabilities.vault.prepare_tools</code>`, "policies/vault/vault.rego:13:1</code>", "gate.rego"},
		{schema, "c1", `schema <code>parameters_json_schema of &#34;get_time&#34; in the registry</code>`, "", "gate.rego"},
	} {
		cell := callRuleCell(t, c.page, c.id)
		first, after := strings.Index(cell, c.first), strings.Index(cell, c.after)
		if first < 0 || after >= 0 && after < first || !strings.Contains(cell, c.loc) {
			t.Errorf("call %s: decided by %s, want %s (%s) first and then %s", c.id, cell, c.first, c.loc, c.after)
		}
	}
	if cell := callRuleCell(t, refund, "c1"); !strings.Contains(cell, "gate.rego") || strings.Contains(cell, `class="decider"`) {
		t.Errorf("call c1, executed by the gate alone: decided by %s", cell)
	}
	if !strings.Contains(transfer, `<span class="told">the approver is asked:</span> <span class="msg-text">Approve a transfer of 5000 from ops to savings?</span>`) {
		t.Errorf("the page does not say the approver is asked")
	}
}

// layoutCheck reads, from the rendered page, the words of the calls
// table (outside its long tokens: arguments, digests, file paths; a line
// may end after a word's hyphen) that are broken across lines, and where the lines of each call's
// message start.
const layoutCheck = `<script>
(() => {
  const out = {broken: [], messages: []};
  const tops = range => [...new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)))];
  for (const cell of document.querySelectorAll("tr.call td")) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.parentElement.closest(".token")) continue;
      for (const w of n.data.matchAll(/\S+/g)) {
        if (w[0].includes("/")) continue; // a file's path: a long token
        for (const m of w[0].matchAll(/[^-]+-?/g)) { // a line may end after a hyphen
          const r = document.createRange();
          r.setStart(n, w.index + m.index);
          r.setEnd(n, w.index + m.index + m[0].length);
          if (tops(r).length > 1) out.broken.push(m[0]);
        }
      }
    }
  }
  for (const el of document.querySelectorAll(".msg-text")) {
    const n = el.firstChild, lines = [];
    for (const m of n.data.matchAll(/[^\n]+/g)) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + 1);
      lines.push(tops(r)[0]);
    }
    out.messages.push({text: el.textContent, tops: lines});
  }
  const pre = document.createElement("pre");
  pre.id = "page-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

// TestExplainPageLayout opens explain's page in headless Chromium: in a
// narrow window no word of the calls table (a verdict, a tool, a rule's
// name) is broken across lines, only the long tokens are; and a message's
// newlines, kept as text, start new lines.
func TestExplainPageLayout(t *testing.T) {
	t.Parallel()
	browser := headlessChromium(t)
	dir := t.TempDir()
	writeFile(t, dir, "lines.rego", "package policycheck.rules.lines\n\ndeny contains {\"reason\": \"two lines\", \"message\": \"Stop.\\nAsk first.\"} if input.call.tool == \"get_time\"\n")
	args := []string{"--registry", filepath.Join(examplesDir, "registry.yaml"), "--policy", filepath.Join(examplesDir, "policies"),
		"--policy", filepath.Join(dir, "lines.rego"), "--context", filepath.Join(examplesDir, "context", "support.json")}
	history := filepath.Join(examplesDir, "histories", "refund.json")
	_, page := explainBoth(t, append(args, "--history", history)...)
	var narrow struct{ Broken []string }
	checkInChromium(t, browser, page, layoutCheck, &narrow, "--window-size=420,900")
	if len(narrow.Broken) > 0 {
		t.Errorf("at 420 pixels, the calls table breaks the words %q", narrow.Broken)
	}
	// A response calling get_time, which the rule denies with two lines.
	timeHistory := writeFile(t, dir, "history.json", `[{"kind":"request","parts":[`+userPrompt+`]},
 {"kind":"response","parts":[`+callTime+`]}]`)
	_, page = explainBoth(t, append(args, "--history", timeHistory)...)
	var wide struct {
		Messages []struct {
			Text string
			Tops []int
		}
	}
	checkInChromium(t, browser, page, layoutCheck, &wide, "--window-size=1600,900")
	if len(wide.Messages) != 1 || wide.Messages[0].Text != "Stop.\nAsk first." ||
		len(wide.Messages[0].Tops) != 2 || wide.Messages[0].Tops[1] <= wide.Messages[0].Tops[0] {
		t.Errorf("the message \"Stop.\\nAsk first.\" is drawn as %+v, want its two lines one below the other", wide.Messages)
	}
}
