package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
)

// withContent adds a resource, a resource template, a prompt and a
// completion handler to an upstream, named after tag.
func withContent(f *fakeUpstream, tag string) {
	f.srv.AddResource(&mcp.Resource{URI: "test://" + tag + "/doc", Name: tag + "-doc", MIMEType: "text/plain"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: tag + " doc"}}}, nil
		})
	f.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://" + tag + "/items/{id}", Name: tag + "-item"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: tag + " item"}}}, nil
		})
	f.srv.AddPrompt(&mcp.Prompt{Name: tag + "-greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello from " + tag}}}}, nil
	})
	f.srv.AddPrompt(&mcp.Prompt{Name: "shared"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: tag}}}}, nil
	})
}

func readText(t *testing.T, cs *mcp.ClientSession, uri string) (string, error) {
	t.Helper()
	r, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", err
	}
	return r.Contents[0].Text, nil
}

// TestForwardOff: without Config.Forward the gateway offers no
// resources, prompts or completions, whatever its upstream has.
func TestForwardOff(t *testing.T) {
	f := newFakeUpstream()
	withContent(f, "files")
	g := newTestGateway(t, f, nil)
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	caps := cs.InitializeResult().Capabilities
	if caps.Resources != nil || caps.Prompts != nil || caps.Completions != nil {
		t.Fatalf("capabilities %+v", caps)
	}
	if _, err := readText(t, cs, "test://files/doc"); err == nil {
		t.Fatal("a resource was read with forwarding off")
	}
	if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "files-greet"}); err == nil {
		t.Fatal("a prompt was got with forwarding off")
	}
}

// TestForwardOneUpstream: with one upstream every forwarded request goes
// to it: listings, reads (a listed URI and a template's), prompts,
// completion, subscribe and unsubscribe.
func TestForwardOneUpstream(t *testing.T) {
	f := newFakeUpstream()
	withContent(f, "files")
	g := newTestGateway(t, f, func(c *gateway.Config) {
		c.Forward = gateway.Forwarding{Resources: true, Prompts: true, Completions: true}
	})
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	ctx := context.Background()
	caps := cs.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || caps.Prompts == nil || caps.Completions == nil {
		t.Fatalf("capabilities %+v", caps)
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != "test://files/doc" {
		t.Fatalf("resources/list %+v %v", rl, err)
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) != 1 {
		t.Fatalf("resources/templates/list %+v %v", tl, err)
	}
	for uri, want := range map[string]string{"test://files/doc": "files doc", "test://files/items/7": "files item"} {
		if got, err := readText(t, cs, uri); err != nil || got != want {
			t.Fatalf("read %s = %q, %v", uri, got, err)
		}
	}
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 2 {
		t.Fatalf("prompts/list %+v %v", pl, err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "files-greet"})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "hello from files" {
		t.Fatalf("prompts/get %+v %v", gp, err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://files/doc"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://files/doc"}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
}

// TestForwardRouting: with several upstreams a URI goes to the one
// upstream that lists it or has a template matching it, a prompt to the
// one that lists it; a name two list is refused, and so is one none
// lists. Listings are every upstream's, in --upstream order.
func TestForwardRouting(t *testing.T) {
	files, notes := newFakeUpstream(), newFakeUpstream()
	withContent(files, "files")
	withContent(notes, "notes")
	g := newTestGateway(t, files, func(c *gateway.Config) {
		c.Forward = gateway.Forwarding{Resources: true, Prompts: true, Completions: true}
		c.Upstreams = append(c.Upstreams, notes.upstreamSpec("notes"))
	})
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	ctx := context.Background()
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 2 || rl.Resources[0].URI != "test://files/doc" || rl.Resources[1].URI != "test://notes/doc" {
		t.Fatalf("resources/list %+v %v", rl, err)
	}
	for uri, want := range map[string]string{
		"test://files/doc": "files doc", "test://notes/doc": "notes doc",
		"test://notes/items/3": "notes item", "test://files/items/4": "files item",
	} {
		if got, err := readText(t, cs, uri); err != nil || got != want {
			t.Fatalf("read %s = %q, %v", uri, got, err)
		}
	}
	if _, err := readText(t, cs, "test://elsewhere/doc"); err == nil || !strings.Contains(err.Error(), "no connected upstream offers") {
		t.Fatalf("unknown URI: %v", err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "notes-greet"})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "hello from notes" {
		t.Fatalf("prompts/get %+v %v", gp, err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "shared"}); err == nil || !strings.Contains(err.Error(), "several upstreams (files, notes)") {
		t.Fatalf("ambiguous prompt: %v", err)
	}
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 4 {
		t.Fatalf("prompts/list %+v %v", pl, err)
	}
}

func TestParseForward(t *testing.T) {
	f, err := gateway.ParseForward([]string{"resources,prompts", "completions"})
	if err != nil || f != (gateway.Forwarding{Resources: true, Prompts: true, Completions: true}) {
		t.Fatalf("%+v %v", f, err)
	}
	if f, err := gateway.ParseForward([]string{"none"}); err != nil || f != (gateway.Forwarding{}) {
		t.Fatalf("none: %+v %v", f, err)
	}
	if _, err := gateway.ParseForward([]string{"resources,tools"}); err == nil {
		t.Fatal("tools accepted")
	}
}
