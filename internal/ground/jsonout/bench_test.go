package jsonout_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/ground/jsonout"
)

// BenchmarkEncodeDecision indents a decision listing a thousand tools
// (its strings read by wire.StringEnd): what eval and the sidecar pay to
// write one.
func BenchmarkEncodeDecision(b *testing.B) {
	d := &engine.Decision{}
	for i := range 1000 {
		name := fmt.Sprintf("tool_%04d_with_a_longer_name", i)
		d.Available = append(d.Available, name)
		d.Advertised = append(d.Advertised, name)
		d.Calls = append(d.Calls, engine.CallVerdict{Tool: name, Verdict: engine.Denied, Message: "denied: the call reads \"secrets\" after an untrusted fetch"})
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := jsonout.Encode(&buf, d); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}
