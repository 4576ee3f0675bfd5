package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway writes its sessions' history in pydantic-ai's JSON (spec
// §1): each call it judged as a response with one tool-call part, and
// what answered it as the next request: a tool-return (the upstream's
// result, or a meta-tool's typed return), a retry-prompt (a refusal, an
// upstream error), and after a load the tool-availability-delta the
// framework writes (W19). Nothing else enters a history: only calls the
// gateway saw exist.

// Typed tool kinds (spec W14).
const (
	kindSearch = "tool-search"
	kindLoad   = "capability-load"
)

func timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func appendString(b []byte, s string) []byte {
	raw, _ := json.Marshal(s) // a string always marshals
	return append(b, raw...)
}

func appendKind(b []byte, kind string) []byte {
	if kind == "" {
		return append(b, "null"...)
	}
	return appendString(b, kind)
}

// callMessage is a response holding one tool call.
func callMessage(b []byte, ts, tool string, args []byte, id, kind string) []byte {
	b = append(b, `{"parts":[{"tool_name":`...)
	b = appendString(b, tool)
	b = append(b, `,"args":`...)
	b = append(b, args...)
	b = append(b, `,"tool_call_id":`...)
	b = appendString(b, id)
	b = append(b, `,"tool_kind":`...)
	b = appendKind(b, kind)
	b = append(b, `,"id":null,"provider_name":null,"provider_details":null,"part_kind":"tool-call"}],"timestamp":`...)
	b = appendString(b, ts)
	return append(b, `,"kind":"response","provider_name":null}`...)
}

// returnPart is a tool-return part; content is JSON.
func returnPart(b []byte, ts, tool string, content []byte, id, kind, outcome, receipt string) []byte {
	b = append(b, `{"tool_name":`...)
	b = appendString(b, tool)
	b = append(b, `,"content":`...)
	b = append(b, content...)
	b = append(b, `,"tool_call_id":`...)
	b = appendString(b, id)
	b = append(b, `,"tool_kind":`...)
	b = appendKind(b, kind)
	b = append(b, `,"metadata":`...)
	if receipt != "" {
		b = append(b, `{"policycheck_receipt":`...)
		b = appendString(b, receipt)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"timestamp":`...)
	b = appendString(b, ts)
	b = append(b, `,"outcome":`...)
	b = appendString(b, outcome)
	return append(b, `,"part_kind":"tool-return"}`...)
}

// retryPart is a retry-prompt part answering a call.
func retryPart(b []byte, ts, tool, msg, id string) []byte {
	b = append(b, `{"content":`...)
	b = appendString(b, msg)
	b = append(b, `,"tool_name":`...)
	b = appendString(b, tool)
	b = append(b, `,"tool_call_id":`...)
	b = appendString(b, id)
	b = append(b, `,"timestamp":`...)
	b = appendString(b, ts)
	return append(b, `,"part_kind":"retry-prompt"}`...)
}

// deltaPart is a tool-availability-delta part.
func deltaPart(b []byte, names []string, id string) []byte {
	b = append(b, `{"tools_added":[`...)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, n)
	}
	b = append(b, `],"tool_call_id":`...)
	b = appendString(b, id)
	return append(b, `,"part_kind":"tool-availability-delta"}`...)
}

// requestMessage wraps parts (each a JSON object) as a request.
func requestMessage(ts string, parts ...[]byte) []byte {
	var b []byte
	b = append(b, `{"parts":[`...)
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p...)
	}
	b = append(b, `],"timestamp":`...)
	b = appendString(b, ts)
	return append(b, `,"kind":"request"}`...)
}

// resultContent is an upstream result as a tool-return's content, as
// pydantic-ai's MCP client reads one: the structured content when there
// is one; otherwise each content item (a text as its string, anything
// else as its MCP JSON), one item as itself, several as a list.
func resultContent(res *mcp.CallToolResult) ([]byte, error) {
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	items := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			items = append(items, t.Text)
			continue
		}
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		items = append(items, json.RawMessage(raw))
	}
	if len(items) == 1 {
		return json.Marshal(items[0])
	}
	return json.Marshal(items)
}

// resultText is the text of an error result, for the retry prompt.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "The tool failed."
	}
	return strings.Join(parts, "\n")
}

// historyJSON is a session's messages as one JSON array.
func historyJSON(msgs [][]byte) []byte {
	n := 2
	for _, m := range msgs {
		n += len(m) + 1
	}
	var b bytes.Buffer
	b.Grow(n)
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteString("]\n")
	return b.Bytes()
}
