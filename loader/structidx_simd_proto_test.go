//go:build goexperiment.simd && amd64 && unix

package loader_test

// The structural-index prototype's classification with Go 1.26's
// experimental SIMD package (GOEXPERIMENT=simd, AVX2): 32 bytes per
// compare. Run with
//
//	GOEXPERIMENT=simd go test -run StructuralIndex -bench StructuralIndex -cpu 1 ./loader

import (
	"simd/archsimd"
	"slices"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/cputime"
)

var (
	vQuote = archsimd.BroadcastUint8x32('"')
	vBs    = archsimd.BroadcastUint8x32('\\')
	vOpen  = archsimd.BroadcastUint8x32('{')
	vClose = archsimd.BroadcastUint8x32('}')
	vColon = archsimd.BroadcastUint8x32(':')
	vComma = archsimd.BroadcastUint8x32(',')
	v20    = archsimd.BroadcastUint8x32(0x20)
	v80    = archsimd.BroadcastUint8x32(0x80)
)

func classify32(b []byte) (quote, bs, st, ctl, hi uint32) {
	x := archsimd.LoadUint8x32Slice(b)
	x20 := x.Or(v20)
	quote = x.Equal(vQuote).ToBits()
	bs = x.Equal(vBs).ToBits()
	st = x20.Equal(vOpen).Or(x20.Equal(vClose)).Or(x.Equal(vColon)).Or(x.Equal(vComma)).ToBits()
	ctl = x.Less(v20).ToBits()
	hi = x.GreaterEqual(v80).ToBits()
	return
}

func classifySIMD(b []byte) (quote, bs, st, ctl, hi uint64) {
	q0, b0, s0, c0, h0 := classify32(b[:32])
	q1, b1, s1, c1, h1 := classify32(b[32:64])
	return uint64(q0) | uint64(q1)<<32, uint64(b0) | uint64(b1)<<32, uint64(s0) | uint64(s1)<<32,
		uint64(c0) | uint64(c1)<<32, uint64(h0) | uint64(h1)<<32
}

func TestStructuralIndexSIMD(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2")
	}
	for _, in := range [][]byte{benchHistory(100), benchHistory(1000), []byte(`{"a":"\\\"é","b":[1,{"c":null}]}`)} {
		got, err := structIndexBy(in, nil, classifySIMD)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := structIndex(in, nil); !slices.Equal(got, want) {
			t.Fatalf("%.60q: the SIMD index differs from the word-trick one", in)
		}
	}
	if _, err := structIndexBy([]byte("[\"a\x01\"]"), nil, classifySIMD); err == nil {
		t.Error("a control character in a string: no error")
	}
}

func BenchmarkStructuralIndexSIMD(b *testing.B) {
	if !archsimd.X86.AVX2() {
		b.Skip("no AVX2")
	}
	data := benchHistory(1000)
	idx := make([]uint32, 0, len(data)/4)
	b.SetBytes(int64(len(data)))
	defer cputime.PerOp(b)()
	for b.Loop() {
		var err error
		if idx, err = structIndexBy(data, idx[:0], classifySIMD); err != nil {
			b.Fatal(err)
		}
	}
}
