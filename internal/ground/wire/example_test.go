package wire_test

import (
	"fmt"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// IsSpace is the whitespace a JSON reader skips between tokens; a
// non-breaking space is not JSON whitespace.
func ExampleIsSpace() {
	for _, c := range []byte(" \t\n\r\u00a0x") {
		fmt.Print(wire.IsSpace(c), " ")
	}
	fmt.Println()
	// Output:
	// true true true true false false false
}

// StringStop passes the bytes of a JSON string that stand for themselves:
// a reader of strings looks only at the bytes it stops at.
func ExampleStringStop() {
	b := []byte(`"plain words, then an escape \n and the end" : 1`)
	i := wire.StringStop(b, 1)
	fmt.Printf("%d %q\n", i, b[i])
	i = wire.StringStop(b, i+2)
	fmt.Printf("%d %q\n", i, b[i])
	// Output:
	// 29 '\\'
	// 43 '"'
}

// Skip checks a JSON value where it lies and says where it ends. It
// refuses what encoding/json would read as U+FFFD, here a lone surrogate
// escape, naming where it is inside the value.
func ExampleSkip() {
	body := []byte(`{"context": {"user": "ana", "groups": ["ops"]}, "history": []}`)
	end, err := wire.Skip("request", body, len(`{"context":`), 200)
	fmt.Println(end, err)
	fmt.Printf("%s\n", body[len(`{"context":`):end])

	_, err = wire.Skip("context.json", []byte(`{"user": "a\udc00b"}`), 0, 200)
	fmt.Println(err.Pointer, err.Offset, err.Msg)
	// Output:
	// 46 <nil>
	//  {"user": "ana", "groups": ["ops"]}
	// /user 11 invalid JSON: lone UTF-16 surrogate \udc00
}

// A request body's envelope: the members a handler reads, the elements of
// its history, and the names of members it does not read.
func ExampleSkimEnvelope() {
	body := []byte(`{"history": [{"kind": "request"}, {"kind": "response"}], "context": {"user": "ana"}, "extra": 1}`)
	env, err := wire.SkimEnvelope(body, wire.EnvelopeSpec{File: "request", Known: []string{"history", "context"}, Arrays: []string{"history"}, MaxDepth: 200})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(env.Members["context"]), len(env.Elements["history"]), env.Unknown)
	_, err = wire.SkimEnvelope([]byte(`{"context": {"user": "ana"}} x`), wire.EnvelopeSpec{File: "request", MaxDepth: 200})
	fmt.Println(err)
	// Output:
	// {"user": "ana"} 2 [extra]
	// request: (root): invalid JSON: unexpected data after the object (line 1, column 30)
}
