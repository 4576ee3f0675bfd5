package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

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
