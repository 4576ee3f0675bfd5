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
// to a few calls. Both agree with a look-up written out here (every call
// read, then the budget spent from the first), and the plain look-up
// reads no call past the first its budget does not cover.
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
		var calls [][]byte
		// The last look-up: sentArgs answers it again without spending.
		var last struct {
			want  jsonvalue.EchoWant
			found int
			ok    bool
		}
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
			calls = append(calls, args)
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
			w := jsonvalue.WantText(leaf)
			if num {
				w = jsonvalue.WantNumber(leaf)
			}
			br := &flowBudget{call: budget, response: budget}
			ir, okr := last.found, true
			if !last.ok || last.want != w {
				ir, okr = firstWrittenOut(calls, w, br)
			}
			last.want, last.found, last.ok = w, ir, okr
			readBefore := max(len(plain.sums)-1, 0)
			ip, okp := plain.first(w, bp)
			i, ok := fast.first(w, bf)
			require.Equal(t, okr, okp, "round %d query %d: %q num=%v", round, q, leaf, num)
			require.Equal(t, okp, ok, "round %d query %d: %q num=%v", round, q, leaf, num)
			if ok {
				require.Equal(t, ir, ip, "round %d query %d: %q num=%v", round, q, leaf, num)
				require.Equal(t, ip, i, "round %d query %d: %q num=%v", round, q, leaf, num)
			}
			require.Equal(t, *br, *bp, "round %d query %d: %q num=%v: the budget left", round, q, leaf, num)
			require.Equal(t, *bp, *bf, "round %d query %d: %q num=%v: the budget left", round, q, leaf, num)
			require.LessOrEqual(t, len(plain.sums)-1, max(readBefore, readCovered(calls, budget)),
				"round %d query %d: the plain look-up read calls its budget %d does not cover", round, q, budget)
		}
	}
}

// firstWrittenOut is sentArgs.first written out: every call read, the
// first holding w found, then the bytes of the calls up to it (up to
// the last when none holds it) spent from b, one call after another.
func firstWrittenOut(calls [][]byte, w jsonvalue.EchoWant, b *flowBudget) (int, bool) {
	found := len(calls)
	for i, c := range calls {
		if jsonvalue.EchoOf(c).Has(w) {
			found = i
			break
		}
	}
	for i := 0; i <= min(found, len(calls)-1); i++ {
		if !b.spend(jsonvalue.EchoOf(calls[i]).Size()) {
			return 0, false
		}
	}
	return found, true
}

// readCovered is how many of calls a look-up whose budget is budget may
// read: those whose comparison it covers, and the first it does not.
func readCovered(calls [][]byte, budget int) int {
	sum := 0
	for i, c := range calls {
		if sum += jsonvalue.EchoOf(c).Size(); sum > budget {
			return i + 1
		}
	}
	return len(calls)
}

// TestEchoLookupSpendsToTheByte: at the budget's edges, sentArgs.first
// spends what the look-up written out spends: calls of 10 bytes each
// (a key and a value, folded), a value none holds, budgets around the
// sums of the calls' sizes.
func TestEchoLookupSpendsToTheByte(t *testing.T) {
	var calls [][]byte
	for i := range 5 {
		calls = append(calls, []byte(fmt.Sprintf(`{"k": "abcdefgh%d"}`, i)))
	}
	require.Equal(t, 10, jsonvalue.EchoOf(calls[0]).Size())
	for _, budget := range []int{0, 1, 9, 10, 11, 19, 20, 21, 29, 30, 31, 39, 40, 41, 49, 50, 51} {
		for _, grams := range []bool{false, true} {
			var l sentArgs
			if grams {
				l.grams, l.numKeys = map[uint32]int32{}, map[string]int32{}
			}
			for _, c := range calls {
				l.note(&Message{Kind: Response, Parts: []Part{{Kind: ToolCall, ToolName: "t", Args: c}}})
			}
			for _, want := range []jsonvalue.EchoWant{jsonvalue.WantText("zzzz"), jsonvalue.WantText("abcdefgh3")} {
				b, ref := &flowBudget{call: budget, response: 100}, &flowBudget{call: budget, response: 100}
				i, ok := l.first(want, b)
				ri, rok := firstWrittenOut(calls, want, ref)
				require.Equal(t, rok, ok, "budget %d grams %v %v", budget, grams, want)
				if ok {
					require.Equal(t, ri, i, "budget %d grams %v %v", budget, grams, want)
				}
				require.Equal(t, *ref, *b, "budget %d grams %v %v: the budget left", budget, grams, want)
			}
		}
	}
}
