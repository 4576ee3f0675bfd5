package gateway

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/facts"
)

// searchByQueryTokens is search as it was first written, each tool
// scored by walking the query's tokens: the definition the search keeps
// (its cost was the query's tokens times the tools:
// BenchmarkSearchLongQuery).
func searchByQueryTokens(queries []string, corpus []facts.Tool, discovered []string) []string {
	q := tokens(strings.Join(queries, " "))
	type hit struct {
		name         string
		undiscovered bool
		score        int
	}
	var hits []hit
	for _, t := range corpus {
		tt := tokens(t.Name + " " + t.Description)
		score := 0
		for k := range q {
			if _, ok := tt[k]; ok {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{t.Name, !slices.Contains(discovered, t.Name), score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if a.undiscovered != b.undiscovered {
			if a.undiscovered {
				return -1
			}
			return 1
		}
		return b.score - a.score
	})
	names := []string{}
	for i, h := range hits {
		if i == maxSearchResults {
			break
		}
		names = append(names, h.name)
	}
	return names
}

// TestSearchScoresTheQuerysTokensTheToolHas: the search counts, for each
// tool, the query's tokens its name and description hold, whichever
// side it walks: on random corpora and queries over a small vocabulary
// (so that tools share tokens, tie and repeat them), it names the tools
// the definition names, in its order.
func TestSearchScoresTheQuerysTokensTheToolHas(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 2))
	words := []string{"read", "write", "file", "mail", "send", "pay", "bill", "list", "user", "Files", "MAIL", "x1"}
	phrase := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString([]string{" ", "_", "-", ", "}[rng.IntN(4)])
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	for round := range 500 {
		var corpus []facts.Tool
		var discovered []string
		for i := range rng.IntN(30) {
			name := fmt.Sprintf("t%d_%s", i, phrase(1+rng.IntN(2)))
			corpus = append(corpus, facts.Tool{Name: name, Description: phrase(rng.IntN(8))})
			if rng.IntN(3) == 0 {
				discovered = append(discovered, name)
			}
		}
		slices.Sort(discovered)
		queries := []string{phrase(rng.IntN(6))}
		if rng.IntN(2) == 0 {
			queries = append(queries, phrase(rng.IntN(4)))
		}
		want := searchByQueryTokens(queries, corpus, discovered)
		got, ok := search(queries, corpus, discovered)
		if !ok {
			if len(tokens(strings.Join(queries, " "))) != 0 {
				t.Fatalf("round %d: a query with tokens refused: %q", round, queries)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: query %q over %d tools: got %v, want %v", round, queries, len(corpus), got, want)
		}
	}
}

// BenchmarkSearchLongQuery: one 2^16-word query (450 KB) over 10 and
// 1,000 search-gated tools. Scored by walking the query's tokens for
// each tool, the second cost a hundred times the first (its tokens times
// the tools: 2 MB over 1,000 tools held a core 6.3 s); each tool's own
// tokens looked up in the query's, the query is read once.
func BenchmarkSearchLongQuery(b *testing.B) {
	var qb strings.Builder
	for i := range 1 << 16 {
		fmt.Fprintf(&qb, "w%d ", i)
	}
	queries := []string{qb.String()}
	for _, n := range []int{10, 1000} {
		corpus := make([]facts.Tool, n)
		for i := range corpus {
			corpus[i] = facts.Tool{Name: fmt.Sprintf("files/tool%d", i), Description: fmt.Sprintf("does thing number %d for the user", i)}
		}
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			for b.Loop() {
				search(queries, corpus, nil)
			}
		})
	}
}
