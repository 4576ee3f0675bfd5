package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/loader"
)

// A gateway in front of an in-process MCP server: the registry maps its
// tool get_forecast as search-gated, so a client sees search_tools, finds
// the tool, and calls it.
func Example() {
	ctx := context.Background()
	upstream := mcp.NewServer(&mcp.Implementation{Name: "weather"}, nil)
	upstream.AddTool(&mcp.Tool{Name: "get_forecast", Description: "Weather forecast for a city", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny"}}}, nil
		})
	reg, err := loader.ParseRegistry("registry.yaml", []byte("tools:\n  - name: get_forecast\n    upstream: weather\n    defer_loading: true\n"))
	if err != nil {
		panic(err)
	}
	g, err := gateway.New(ctx, gateway.Config{Registry: reg, Upstreams: []gateway.Upstream{{
		Name: "weather",
		Transport: func() (mcp.Transport, error) {
			client, server := mcp.NewInMemoryTransports()
			_, err := upstream.Connect(ctx, server, nil)
			return client, err
		},
	}}})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	client, server := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, server, gateway.Principal{Name: "alice"}); err != nil {
		panic(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, client, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()

	list, _ := cs.ListTools(ctx, nil)
	for _, t := range list.Tools {
		fmt.Println("listed:", t.Name)
	}
	show := func(name string, args map[string]any) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: error=%v %s\n", name, res.IsError, res.Content[0].(*mcp.TextContent).Text)
	}
	show("get_forecast", map[string]any{})
	show("search_tools", map[string]any{"queries": []string{"weather"}})
	show("get_forecast", map[string]any{})
	// Output:
	// listed: search_tools
	// get_forecast: error=true Tool 'get_forecast' is not available yet: search for it first, then call it again once you've seen its schema.
	// search_tools: error=false {"discovered_tools":[{"name":"get_forecast"}]}
	// get_forecast: error=false sunny
}
