package loader_test

import (
	"reflect"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
)

// TestTranscriptIsTheHistory: a transcript's history is the one
// DecodeHistory reads, with one text per part and one entry per message;
// a part's text is the first of content, args, tools_added and added
// present and not null.
func TestTranscriptIsTheHistory(t *testing.T) {
	o := gen.Default(20)
	data := gen.History(3, o)
	h, err := loader.DecodeHistory("gen.json", data, loader.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := loader.DefaultReader().ReadTranscript("gen.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h, tr.History) || len(tr.Messages) != len(h) {
		t.Fatalf("the transcript's history differs from DecodeHistory's")
	}
	for i := range h {
		if len(tr.Messages[i].Texts) != len(h[i].Parts) {
			t.Fatalf("message %d: %d texts for %d parts", i, len(tr.Messages[i].Texts), len(h[i].Parts))
		}
	}
	tr, err = loader.DecodeTranscript("t.json", []byte(`[{"kind": "request", "provider_name": "p", "parts": [
		{"part_kind": "tool-availability-delta", "tools_added": null, "added": ["a"]},
		{"part_kind": "retry-prompt", "content": "again"},
		{"part_kind": "user-prompt", "content": ["x", 1]}]}]`), loader.DefaultLimits())
	if err == nil {
		t.Fatalf("a null tools_added is refused by the decoder, transcript or not: %+v", tr)
	}
	tr, err = loader.DecodeTranscript("t.json", []byte(`[{"kind": "request", "provider_name": "p", "parts": [
		{"part_kind": "tool-availability-delta", "added": ["a"]},
		{"part_kind": "retry-prompt", "content": "again"},
		{"part_kind": "user-prompt", "content": ["x", 1]}]}]`), loader.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, text := range tr.Messages[0].Texts {
		got = append(got, string(text))
	}
	if want := []string{`["a"]`, `"again"`, `["x", 1]`}; !reflect.DeepEqual(got, want) || tr.Messages[0].Provider != "p" {
		t.Fatalf("texts %q, provider %q", got, tr.Messages[0].Provider)
	}
}
