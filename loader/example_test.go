package loader_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

func ExampleDecodeHistory() {
	data := []byte(`[
 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather in Paris?"}]},
 {"kind": "response", "provider_name": "openai", "parts": [
   {"part_kind": "tool-call", "tool_name": "search_tools", "args": {"queries": ["weather"]},
    "tool_call_id": "s1", "tool_kind": "tool-search"}]},
 {"kind": "request", "parts": [
   {"part_kind": "tool-return", "tool_name": "search_tools", "tool_call_id": "s1", "tool_kind": "tool-search",
    "content": {"discovered_tools": [{"name": "get_forecast"}]}}]}
]`)
	h, err := loader.DecodeHistory("run.json", data, loader.DefaultLimits())
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, m := range h {
		for _, p := range m.Parts {
			fmt.Printf("%d %s %s %s reveals=%v\n", i, m.Kind, p.Kind, p.ToolKind, p.Reveals)
		}
	}

	// A typed load call must name its capability by a string id: the
	// whole history is rejected, and the error points at the value.
	bad := []byte(`[{"kind": "response", "parts": [
 {"part_kind": "tool-call", "tool_name": "load_capability", "args": {"id": 5},
  "tool_call_id": "l1", "tool_kind": "capability-load"}]}]`)
	_, err = loader.DecodeHistory("bad.json", bad, loader.DefaultLimits())
	var le *loader.Error
	if errors.As(err, &le) {
		fmt.Println("file:", le.File)
		fmt.Println("pointer:", le.Pointer)
		fmt.Println("kind:", le.Kind)
	}
	fmt.Println(err)
	// Output:
	// 0 request user-prompt  reveals=[]
	// 1 response tool-call tool-search reveals=[]
	// 2 request tool-return tool-search reveals=[get_forecast]
	// file: bad.json
	// pointer: /0/parts/0/args/id
	// kind: schema
	// bad.json: /0/parts/0/args/id: a capability id must be a string, not a number
}

func ExampleParseRegistry() {
	reg, err := loader.ParseRegistry("tools.yaml", []byte(`
capabilities:
  - id: vault
    defer_loading: true
tools:
  - name: get_time
  - name: search_docs
    defer_loading: true
  - name: read_secret
    capability: vault
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("tools:", reg.ToolNames())
	fmt.Println("search-gated:", reg.SearchGatedTools(), "deferred:", reg.DeferredCapabilities())

	_, err = loader.ParseRegistry("bad.yaml", []byte("tools:\n  - name: load_capability\n"))
	fmt.Println(err)
	// Output:
	// tools: [get_time read_secret search_docs]
	// search-gated: [search_docs] deferred: [vault]
	// bad.yaml: /tools/0/name: tool name 'load_capability' is reserved for deferred capability loading
}

// ExampleReadApprovalsFile: a person's answers, shaped like pydantic-ai's
// DeferredToolResults, each with the digest the decision handed out.
func ExampleReadApprovalsFile() {
	doc := `{"approvals": {"t2": {"kind": "tool-denied", "digest": "sha256:` + strings.Repeat("0", 64) + `",
	  "message": "Not this month.", "approvers": ["ana"]}}, "calls": {}, "metadata": {}}`
	a, err := loader.ReadApprovalsFile("approvals.json", []byte(doc))
	fmt.Println(a["t2"].Kind, a["t2"].Message, a["t2"].Approvers, err)

	_, err = loader.ReadApprovalsFile("approvals.json", []byte(`{"approvals": {"t2": true}}`))
	fmt.Println(err != nil)
	// Output:
	// tool-denied Not this month. [ana] <nil>
	// true
}

// DecodeArray decodes the history array a request body's member begins
// with, here on two goroutines, and says where the array ends: the
// members after it are the caller's to read.
func ExampleDecodeArray() {
	body := []byte(`[
		{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]},
		{"kind": "response", "parts": [{"part_kind": "text", "content": "},{"}]},
		{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "bye"}]}
	], "context": {"user": "ana"}}`)
	a, err := loader.DecodeArray("request", body, loader.DefaultLimits(), 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, m := range a.Messages {
		fmt.Println(i, m.Kind, m.Parts[0].Kind, len(a.Elements[i]))
	}
	fmt.Printf("%s\n", body[a.End:])

	_, err = loader.DecodeArray("request", []byte(`[{"kind": "request", "parts": []}, {"kind": "reply", "parts": []}]`), loader.DefaultLimits(), 2)
	var le *loader.Error
	if errors.As(err, &le) {
		fmt.Println("pointer:", le.Pointer)
	}
	// Output:
	// 0 request user-prompt 77
	// 1 response text 72
	// 2 request user-prompt 78
	// , "context": {"user": "ana"}}
	// pointer: /1/kind
}

// PointerToken escapes an object key for a JSON pointer, as the errors
// of this package name keys.
func ExamplePointerToken() {
	fmt.Println("/tools/" + loader.PointerToken("a/b~c"))
	// Output:
	// /tools/a~1b~0c
}

// A transcript keeps, beside the facts model, what each message and part
// says: what a page for people shows of a history.
func ExampleDecodeTranscript() {
	data := []byte(`[
 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather in Paris?"}]},
 {"kind": "response", "model_name": "gpt-5", "provider_name": "openai", "parts": [
   {"part_kind": "text", "content": "Looking it up."},
   {"part_kind": "tool-call", "tool_name": "get_forecast", "args": {"city": "Paris"}, "tool_call_id": "c1"}]}
]`)
	t, err := loader.DecodeTranscript("run.json", data, loader.DefaultLimits())
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, m := range t.Messages {
		fmt.Printf("%d %s model=%q\n", i, t.History[i].Kind, m.Model)
		for j, text := range m.Texts {
			fmt.Printf("  %s %s\n", t.History[i].Parts[j].Kind, text)
		}
	}
	// Output:
	// 0 request model=""
	//   user-prompt "weather in Paris?"
	// 1 response model="gpt-5"
	//   text "Looking it up."
	//   tool-call {"city": "Paris"}
}

// CompileSchema is the facts.SchemaCompiler ParseRegistry builds its
// registries with; a registry built in Go compiles its schemas with it
// too.
func ExampleCompileSchema() {
	reg, err := facts.NewRegistry(nil, []facts.Tool{{Name: "transfer_funds",
		ParametersJSONSchema: []byte(`{"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}`)}},
		facts.WithSchemaCompiler(loader.CompileSchema))
	if err != nil {
		fmt.Println(err)
		return
	}
	sch := reg.ArgsSchema("transfer_funds")
	fmt.Println("requires amount:", sch.Requires("amount"))
	probs, _ := sch.ValidateArgs([]byte(`{"amount": "5000"}`))
	for _, p := range probs {
		fmt.Println(p)
	}

	_, err = facts.NewRegistry(nil, []facts.Tool{{Name: "t", ParametersJSONSchema: []byte(`{"$ref": "https://example.com/s.json"}`)}},
		facts.WithSchemaCompiler(loader.CompileSchema))
	fmt.Println(err)
	// Output:
	// requires amount: true
	// /amount: got string, want number
	// /tools/0/parameters_json_schema: parameters_json_schema does not compile: failing loading "https://example.com/s.json": a parameters_json_schema must be self-contained: it refers to https://example.com/s.json, which is not read
}
