// Package gatewaytest holds what the tests that drive `policycheck
// gateway` as its clients share: the gateway package's own tests, the
// guides' test of docs/scaling.md's gateway deployment and mcpinterop.
// Registry is the registry their scripted sessions run on and NewUpstream
// the upstream it maps ("files"); Call makes a tool call and reads its
// text; Bearer sends a principal's token with every request.
package gatewaytest

import (
	"context"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Registry maps the upstream "files" for the scripted sessions: a read
// with a schema (read_file), a deferred tool a search reveals
// (files/write_file), a capability to load (refunds) and the tool it
// brings (issue_refund), a call that needs approval (deploy). A test that
// needs more tools appends them: the tools list comes last.
const Registry = `
capabilities:
  - id: refunds
    defer_loading: true
    description: Follow the refund policy.
tools:
  - name: read_file
    upstream: files
    description: Read a file from disk
  - name: files/write_file
    defer_loading: true
    description: Write a file to disk
  - name: issue_refund
    upstream: files
    capability: refunds
  - name: deploy
    upstream: files
    requires_approval: true
`

// NewUpstream is the MCP server "files" a gateway under test forwards
// to, with tools: each answers a call with one text, its name, " ran
// with " and the call's arguments as they came. ran, when not nil, is
// called on each call before it is answered (a test's count of the
// calls that reached the upstream).
func NewUpstream(ran func(), tools ...*mcp.Tool) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "files"}, nil)
	for _, tl := range tools {
		name := tl.Name
		srv.AddTool(tl, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if ran != nil {
				ran()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran with " + string(req.Params.Arguments)}}}, nil
		})
	}
	return srv
}

// Call calls the tool name with args on cs and returns the result's text
// (Text) and whether the result is an error; err is the call's own
// failure (the session's or the protocol's), not the tool's.
func Call(cs *mcp.ClientSession, name string, args any) (text string, isError bool, err error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	return Text(res), res.IsError, nil
}

// Text is the text of a tool call's result: its text contents, joined
// (the other contents are left out).
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Bearer is an http.RoundTripper that sends every request with the
// header "Authorization: Bearer " and Token, through Next
// (http.DefaultTransport when nil). The request it is given is left as
// it is.
type Bearer struct {
	Token string
	Next  http.RoundTripper
}

// RoundTrip sends a copy of r with the token.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	next := b.Next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}
