package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math/bits"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The decision memo. The decision query's result is a pure function of
// the compiled policies, the data (both fixed for a snapshot) and the
// input document, as long as no rule reaches a nondeterministic built-in
// (compile checks that and turns the memo off otherwise). So the
// snapshot keeps the results of recent queries under a digest of their
// exact input. Consecutive steps of an agent run usually decide the next
// request on the same facts (a reveal, a load or a compaction is what
// changes them), a same-step rebuild repeats its dispatch, and a sidecar
// answers retried requests: those are answered without evaluating Rego.
// Only the policy's own result is kept; the decision around it (facts,
// messages, explanations, retry accounting) is built fresh each time.

// memoEntry is a remembered policy result, as decodeResult made it: its
// name lists (most of it, each up to the registry's size) packed as bits
// over the snapshot's sorted names, the rest (verdicts, rule errors)
// kept as decoded and never written.
type memoEntry struct {
	res   *policyResult // without its name lists
	lists [5]packedNames
}

// packedNames is a sorted name list: bit i stands for known.names[i];
// names the registry does not know, if any, are kept as they are.
type packedNames struct {
	bits  []uint64
	n     int
	other []string
}

// nameLists are the result's name lists, in memoEntry.lists order.
func (r *policyResult) nameLists() [5]*[]string {
	return [5]*[]string{&r.available, &r.advertised, &r.hidden, &r.wouldHide, &r.dispatchAvailable}
}

func packEntry(res *policyResult, known *nameTerms) memoEntry {
	rest := *res
	e := memoEntry{res: &rest}
	for i, list := range rest.nameLists() {
		e.lists[i] = pack(*list, known)
		*list = nil
	}
	return e
}

func pack(names []string, known *nameTerms) packedNames {
	p := packedNames{bits: make([]uint64, (len(known.names)+63)/64), n: len(names)}
	j := 0
	for _, n := range names {
		for j < len(known.names) && known.names[j] < n {
			j++
		}
		if j < len(known.names) && known.names[j] == n {
			p.bits[j/64] |= 1 << (j % 64)
		} else {
			p.other = append(p.other, n)
		}
	}
	return p
}

// unpack returns the result with each name list as a new sorted slice.
func (e memoEntry) unpack(known *nameTerms) *policyResult {
	res := *e.res
	for i, list := range res.nameLists() {
		*list = e.lists[i].unpack(known)
	}
	return &res
}

func (p packedNames) unpack(known *nameTerms) []string {
	names := make([]string, 0, p.n)
	for w, word := range p.bits {
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			names = append(names, known.names[i])
			word &= word - 1
		}
	}
	if len(p.other) > 0 {
		names = append(names, p.other...)
		slices.Sort(names)
	}
	return names
}

// inputKey digests an input document canonically: objects and sets in
// OPA's sorted order, every value tagged with its type and every string
// and collection prefixed with its length, so that two documents with the
// same digest are the same document. Values that compare equal in Rego
// but are spelled differently (1 and 1.0) may digest differently; that
// costs a miss, never a wrong hit.
func inputKey(v ast.Value) string {
	d := keyDigest{h: sha256.New()}
	d.value(v)
	var sum [sha256.Size]byte
	d.flush()
	return string(d.h.Sum(sum[:0]))
}

// keyDigest feeds a hash through a small buffer: most writes are a tag
// or a short name.
type keyDigest struct {
	h   hash.Hash
	buf [512]byte
	n   int
}

func (d *keyDigest) flush() {
	d.h.Write(d.buf[:d.n])
	d.n = 0
}

func (d *keyDigest) tag(b byte, n int) {
	if d.n+1+binary.MaxVarintLen64 > len(d.buf) {
		d.flush()
	}
	d.buf[d.n] = b
	d.n++
	d.n += binary.PutUvarint(d.buf[d.n:], uint64(n))
}

func (d *keyDigest) str(b byte, s string) {
	d.tag(b, len(s))
	if d.n+len(s) > len(d.buf) {
		d.flush()
		if len(s) > len(d.buf) {
			d.h.Write([]byte(s))
			return
		}
	}
	d.n += copy(d.buf[d.n:], s)
}

func (d *keyDigest) value(v ast.Value) {
	switch x := v.(type) {
	case ast.Null:
		d.tag('z', 0)
	case ast.Boolean:
		if x {
			d.tag('t', 0)
		} else {
			d.tag('f', 0)
		}
	case ast.Number:
		d.str('n', string(x))
	case ast.String:
		d.str('s', string(x))
	case *ast.Array:
		d.tag('a', x.Len())
		for i := range x.Len() {
			d.value(x.Elem(i).Value)
		}
	case ast.Set:
		d.tag('e', x.Len())
		x.Foreach(func(t *ast.Term) { d.value(t.Value) })
	case ast.Object:
		d.tag('o', x.Len())
		x.Foreach(func(k, t *ast.Term) {
			d.value(k.Value)
			d.value(t.Value)
		})
	default:
		// An input document holds only the kinds above; anything else
		// is digested by its Rego spelling, tagged apart.
		d.str('x', ast.ValueName(x))
		d.str('x', x.String())
	}
}
