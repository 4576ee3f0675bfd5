package caches

import (
	"errors"
	"fmt"
	"strings"
)

// The markers around the generated part of docs/caches.md.
const (
	begin = "<!-- begin table: written from internal/caches; go test ./internal/caches -run TestDocIsTheTable -update -->"
	end   = "<!-- end table -->"
)

// Splice returns doc with the part between its markers replaced by the
// table as Markdown.
func Splice(doc string) (string, error) {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return "", errors.New("docs/caches.md: the table's markers are missing")
	}
	return doc[:i+len(begin)] + "\n" + Markdown() + doc[j:], nil
}

// Markdown renders the table: one summary table, then a section per
// cache.
func Markdown() string {
	var b strings.Builder
	counts := map[Kind]int{}
	for _, c := range Table {
		counts[c.Kind]++
	}
	fmt.Fprintf(&b, "\n%d mechanisms: %d shared caches, %d %s of state, %d prepared once, %d per request.\n\n",
		len(Table), counts[Shared], counts[State], plural(counts[State], "table", "tables"), counts[Prepared], counts[Request])
	b.WriteString("| name | kind | where | key | bound | metric | benchmark (workloads) |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range Table {
		metric := "none (below)"
		if len(c.Metrics) > 0 {
			metric = "`" + strings.Join(c.Metrics, "`, `") + "`"
		}
		bench := "none (below)"
		if len(c.Benches) > 0 {
			var ws []string
			for _, x := range c.Benches {
				ws = append(ws, x.Workload)
			}
			bench = fmt.Sprintf("`%s/%s` (%s)", c.Benches[0].Pkg, c.Benches[0].Func, strings.Join(ws, ", "))
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` `%s` | %s | %s | %s | %s |\n", c.Name, c.Kind, c.File, c.Decl, cell(c.Key), cell(c.Bound), metric, bench)
	}
	for _, c := range Table {
		fmt.Fprintf(&b, "\n### `%s`\n\n", c.Name)
		fmt.Fprintf(&b, "- **Keeps:** %s.\n", c.Keeps)
		fmt.Fprintf(&b, "- **Key:** %s.\n", c.Key)
		fmt.Fprintf(&b, "- **Bound:** %s.\n", c.Bound)
		fmt.Fprintf(&b, "- **Invalidation:** %s.\n", c.Invalidation)
		if c.NoMetric != "" {
			fmt.Fprintf(&b, "- **Metric:** none: %s.\n", c.NoMetric)
		}
		if c.Saves != "" {
			fmt.Fprintf(&b, "- **Saves:** %s.\n", c.Saves)
		}
		if c.NoBench != "" {
			fmt.Fprintf(&b, "- **Benchmark:** none on and off: %s.\n", c.NoBench)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
