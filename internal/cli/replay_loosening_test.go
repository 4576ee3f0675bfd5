package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// colourCheck reports the computed colour of the changes' transition
// cells and of the chart's changed bars.
const colourCheck = `<script>
(() => {
  const out = {cells: [], bars: []};
  for (const td of document.querySelectorAll("tr.change td.transition")) out.cells.push(getComputedStyle(td).color);
  for (const r of document.querySelectorAll("#chart rect.loosening, #chart rect.tightening")) out.bars.push(r.getAttribute("fill"));
  const pre = document.createElement("pre");
  pre.id = "page-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

// TestReplayFailOnLoosening (issue 48, item 8): --fail-on loosening fails
// a replay in which any change moves toward execute (here the candidate
// drops a deny rule: denied->execute) and passes one that only tightens
// (the candidate adds it: execute->denied); it combines with
// transitions. The HTML report marks each change and chart bar as
// loosening or tightening, in colours that differ.
func TestReplayFailOnLoosening(t *testing.T) {
	dir, rule, _ := replayCorpus(t)
	pols := filepath.Join(examplesDir, "policies")
	reg := filepath.Join(examplesDir, "registry.yaml")
	ctx := filepath.Join(examplesDir, "context", "support.json")
	tightens := []string{"replay", "--registry", reg, "--baseline", pols, "--candidate", pols, "--candidate", rule, "--context", ctx, dir}
	loosens := []string{"replay", "--registry", reg, "--baseline", pols, "--baseline", rule, "--candidate", pols, "--context", ctx, dir}
	with := func(args []string, extra ...string) []string {
		return append(append([]string{}, args...), extra...)
	}

	code, out, errs := runCLI(with(tightens, "--fail-on", "loosening")...)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "3 changes")
	code, _, errs = runCLI(with(loosens, "--fail-on", "loosening")...)
	require.Equal(t, 1, code, errs)
	assert.Contains(t, errs, "--fail-on matched: loosening (3)")
	code, _, errs = runCLI(with(loosens, "--fail-on", "*->fail_closed,loosening")...)
	require.Equal(t, 1, code, errs)
	assert.Contains(t, errs, "--fail-on matched: loosening (3)")
	code, _, errs = runCLI(with(tightens, "--fail-on", "loosening->execute")...)
	require.Equal(t, 2, code, errs)

	pages := map[string]string{}
	for name, args := range map[string][]string{"tightening": tightens, "loosening": loosens} {
		code, page, errs := runCLI(with(args, "--format", "html")...)
		require.Equal(t, 0, code, errs)
		rows := regexp.MustCompile(`<tr class="change ([a-z]*)"`).FindAllStringSubmatch(page, -1)
		require.Len(t, rows, 3, name)
		for _, r := range rows {
			assert.Equal(t, name, r[1])
		}
		assert.True(t, strings.Contains(page, `<rect class="`+name+`"`), "%s: the chart's bar is marked", name)
		pages[name] = page
	}

	browser := headlessChromium(t)
	var colours [2]struct{ Cells, Bars []string }
	for i, name := range []string{"tightening", "loosening"} {
		checkInChromium(t, browser, pages[name], colourCheck, &colours[i])
		require.Len(t, colours[i].Cells, 3, name)
		require.Len(t, colours[i].Bars, 1, name)
	}
	assert.NotEqual(t, colours[0].Cells[0], colours[1].Cells[0], "loosening and tightening changes in different colours")
	assert.NotEqual(t, colours[0].Bars[0], colours[1].Bars[0], "loosening and tightening bars in different colours")
}
