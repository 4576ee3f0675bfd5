package loader_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
)

// benchHistory returns the generated history of n messages, built once per
// process and shared by the benchmarks of this file.
var benchHistory = func() func(n int) []byte {
	var mu sync.Mutex
	cache := map[int][]byte{}
	return func(n int) []byte {
		mu.Lock()
		defer mu.Unlock()
		if data, ok := cache[n]; ok {
			return data
		}
		data := gen.History(1, gen.Default(n))
		cache[n] = data
		return data
	}
}()

// benchLimits admit the largest benchmark history.
func benchLimits() loader.Limits {
	lim := loader.DefaultLimits()
	lim.MaxBytes = 1 << 30
	lim.MaxMessages = 1 << 20
	lim.MaxParts = 1 << 24
	return lim
}

func BenchmarkDecodeHistory(b *testing.B) {
	lim := benchLimits()
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			data := benchHistory(n)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := loader.DecodeHistory("bench.json", data, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeArray decodes a 1,000- and a 10,000-message history at
// the start of a request body's tail (the array and its closing brace)
// with one and two goroutines: with two, the second's guess must pay for
// the wall time to halve.
func BenchmarkDecodeArray(b *testing.B) {
	lim := benchLimits()
	for _, c := range []struct{ messages, workers int }{{1000, 1}, {1000, 2}, {10_000, 1}, {10_000, 2}} {
		data := append(append([]byte{}, benchHistory(c.messages)...), '}')
		b.Run(fmt.Sprintf("messages=%d/workers=%d", c.messages, c.workers), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := loader.DecodeArray("bench.json", data, lim, c.workers); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSchemaValidateHistory(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			data := benchHistory(n)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				if err := loader.ValidateHistorySchema("bench.json", doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodingJSONBaseline decodes the same bytes with encoding/json
// into generic maps: the yardstick for the two benchmarks above.
func BenchmarkEncodingJSONBaseline(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			data := benchHistory(n)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				var msgs []map[string]any
				if err := json.Unmarshal(data, &msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
