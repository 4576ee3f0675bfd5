package facts

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts/internal/jsonvalue"
)

// TestEchoLookupStartsWhereTheValueMayFirstAppear: a Tracker's look-up
// of what the agent sent (sentArgs with grams) starts at the first call
// that may hold the value, and answers, and spends the budget, as the
// look-up from the first call (a derivation's) does: the same first
// call, the same verdict past the budget, the same budget left. Calls
// and values are drawn from a small alphabet, so that windows collide
// and most values are held by no call though all their windows are;
// numbers are written several ways (HasNumber); budgets run from ample
// to a few calls.
func TestEchoLookupStartsWhereTheValueMayFirstAppear(t *testing.T) {
	r := rand.New(rand.NewPCG(47, 7))
	word := func() string {
		const alphabet = "abAB-1 2."
		n := 1 + r.IntN(9)
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	number := func() string {
		ns := []string{"12345.67", "1.234567e4", "73401659", "7.3401659e7", "1e3", "1000", "0.5", "123456789012",
			"0.000012345", "1.2345e-5", "123450000000", "1.2345e11"}
		return ns[r.IntN(len(ns))]
	}
	for round := range 400 {
		var plain, fast sentArgs
		fast.grams, fast.numKeys = map[uint32]int32{}, map[string]int32{}
		var texts []string
		for range 1 + r.IntN(30) {
			obj := map[string]any{}
			for k := range 1 + r.IntN(3) {
				switch r.IntN(3) {
				case 0:
					obj[fmt.Sprintf("n%d", k)] = json.Number(number())
				default:
					w := word() + word()
					obj[fmt.Sprintf("k%d", k)] = w
					texts = append(texts, w)
				}
			}
			args, err := json.Marshal(obj)
			require.NoError(t, err)
			m := Message{Kind: Response, Parts: []Part{{Kind: ToolCall, ToolName: "t", Args: args}}}
			plain.note(&m)
			fast.note(&m)
		}
		for q := range 20 {
			leaf, num := word(), false
			switch r.IntN(4) {
			case 0:
				if len(texts) > 0 {
					tx := texts[r.IntN(len(texts))]
					i := r.IntN(len(tx))
					leaf = tx[i : i+r.IntN(len(tx)-i)+1]
				}
			case 1:
				if ks := jsonvalue.EchoOf([]byte("[" + number() + "]")).Numbers(); len(ks) > 0 {
					leaf, num = ks[0], true
				}
			}
			budget := 1 << 20
			if r.IntN(2) == 0 {
				budget = r.IntN(200)
			}
			bp, bf := &flowBudget{call: budget, response: budget}, &flowBudget{call: budget, response: budget}
			ip, okp := plain.first(leaf, num, bp)
			i, ok := fast.first(leaf, num, bf)
			require.Equal(t, okp, ok, "round %d query %d: %q num=%v", round, q, leaf, num)
			if ok {
				require.Equal(t, ip, i, "round %d query %d: %q num=%v", round, q, leaf, num)
			}
			require.Equal(t, *bp, *bf, "round %d query %d: %q num=%v: the budget left", round, q, leaf, num)
		}
	}
}
