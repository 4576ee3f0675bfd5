package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// Forwarding names the MCP features besides tools that the gateway
// forwards to its upstreams (--forward). No policy judges them: a
// resource's or a prompt's content reaches the client, and so the model,
// without a decision, so each is off unless asked for.
type Forwarding struct {
	// Resources forwards resources/list, resources/read,
	// resources/templates/list, resources/subscribe and
	// resources/unsubscribe (not the upstream's
	// notifications/resources/updated).
	Resources bool
	// Prompts forwards prompts/list and prompts/get.
	Prompts bool
	// Completions forwards completion/complete.
	Completions bool
}

// ParseForward reads --forward values: each a comma-separated list of
// resources, prompts and completions (or none); any other word is an
// error.
func ParseForward(values []string) (Forwarding, error) {
	var f Forwarding
	for _, v := range values {
		for _, w := range strings.Split(v, ",") {
			switch strings.TrimSpace(w) {
			case "resources":
				f.Resources = true
			case "prompts":
				f.Prompts = true
			case "completions":
				f.Completions = true
			case "none":
			default:
				return Forwarding{}, fmt.Errorf("--forward %q: %q is not resources, prompts, completions or none", v, w)
			}
		}
	}
	return f, nil
}

// serverOptions adds the forwarded features to opts: their capabilities
// and, for resources, the subscription handlers (the SDK answers
// resources/subscribe and resources/unsubscribe through them).
func (g *Gateway) serverOptions(opts *mcp.ServerOptions) {
	f, caps := g.cfg.Forward, opts.Capabilities
	if f.Resources {
		caps.Resources = &mcp.ResourceCapabilities{Subscribe: true}
		opts.SubscribeHandler = func(ctx context.Context, r *mcp.SubscribeRequest) error {
			ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
			defer cancel()
			cs, err := g.resourceUpstream(ctx, r.Params.URI)
			if err != nil {
				return err
			}
			return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: r.Params.URI})
		}
		opts.UnsubscribeHandler = func(ctx context.Context, r *mcp.UnsubscribeRequest) error {
			ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
			defer cancel()
			cs, err := g.resourceUpstream(ctx, r.Params.URI)
			if err != nil {
				return err
			}
			return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: r.Params.URI})
		}
	}
	if f.Prompts {
		caps.Prompts = &mcp.PromptCapabilities{}
	}
	if f.Completions {
		caps.Completions = &mcp.CompletionCapabilities{}
	}
}

// maxForwardedItems bounds what the gateway gathers from its upstreams'
// listings of resources, templates or prompts.
const maxForwardedItems = 100_000

// forwarded answers a forwarded method; ok is false when method is not
// one the gateway forwards (then the SDK answers it).
func (g *Gateway) forwarded(ctx context.Context, method string, req mcp.Request) (res mcp.Result, ok bool, err error) {
	f := g.cfg.Forward
	switch method {
	case "resources/list", "resources/read", "resources/templates/list":
		if !f.Resources {
			return nil, false, nil
		}
	case "prompts/list", "prompts/get":
		if !f.Prompts {
			return nil, false, nil
		}
	case "completion/complete":
		if !f.Completions {
			return nil, false, nil
		}
	default:
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	switch r := req.(type) {
	case *mcp.ListResourcesRequest:
		res, err = g.listResources(ctx, r.Params)
	case *mcp.ListResourceTemplatesRequest:
		res, err = g.listTemplates(ctx, r.Params)
	case *mcp.ListPromptsRequest:
		res, err = g.listPrompts(ctx, r.Params)
	case *mcp.ReadResourceRequest:
		if r.Params == nil {
			return nil, true, errors.New("resources/read: no params")
		}
		var cs *mcp.ClientSession
		if cs, err = g.resourceUpstream(ctx, r.Params.URI); err == nil {
			res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.Params.URI})
		}
	case *mcp.GetPromptRequest:
		if r.Params == nil {
			return nil, true, errors.New("prompts/get: no params")
		}
		var cs *mcp.ClientSession
		if cs, err = g.promptUpstream(ctx, r.Params.Name); err == nil {
			res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: r.Params.Name, Arguments: r.Params.Arguments})
		}
	case *mcp.CompleteRequest:
		if r.Params == nil || r.Params.Ref == nil {
			return nil, true, errors.New("completion/complete: no ref")
		}
		var cs *mcp.ClientSession
		switch r.Params.Ref.Type {
		case "ref/prompt":
			cs, err = g.promptUpstream(ctx, r.Params.Ref.Name)
		case "ref/resource":
			cs, err = g.templateUpstream(ctx, r.Params.Ref.URI)
		default:
			err = fmt.Errorf("completion/complete: ref type %q is neither ref/prompt nor ref/resource", r.Params.Ref.Type)
		}
		if err == nil {
			res, err = cs.Complete(ctx, &mcp.CompleteParams{Argument: r.Params.Argument, Context: r.Params.Context, Ref: r.Params.Ref})
		}
	default:
		return nil, true, fmt.Errorf("%s: unexpected request", method)
	}
	if err != nil {
		return nil, true, err
	}
	return res, true, nil
}

// liveSessions are the connected upstreams' client sessions, in the
// order of --upstream.
func (g *Gateway) liveSessions() []namedSession {
	var out []namedSession
	for _, name := range g.upOrder {
		u := g.ups[name]
		u.mu.Lock()
		cs, state := u.sess, u.state
		u.mu.Unlock()
		if cs != nil && state == StateUp {
			out = append(out, namedSession{name, cs})
		}
	}
	return out
}

type namedSession struct {
	name string
	cs   *mcp.ClientSession
}

// single is the only upstream's session when the gateway has one: every
// forwarded request goes to it, listings page as it pages.
func (g *Gateway) single() (*mcp.ClientSession, bool, error) {
	if len(g.upOrder) != 1 {
		return nil, false, nil
	}
	live := g.liveSessions()
	if len(live) == 0 {
		return nil, true, fmt.Errorf("upstream %s: %w", g.upOrder[0], errUnavailable)
	}
	return live[0].cs, true, nil
}

// forwardList lists one kind of item of the upstreams: the only
// upstream's page as it answers it (page, from cursor), or every
// connected upstream's whole listing (all) in one page, at most
// maxForwardedItems of them; what names the items in the error.
func forwardList[T any](ctx context.Context, g *Gateway, cursor string, what string,
	page func(*mcp.ClientSession, string) ([]T, string, error),
	all func(context.Context, *mcp.ClientSession) ([]T, error)) ([]T, string, error) {
	if cs, one, err := g.single(); one {
		if err != nil {
			return nil, "", err
		}
		return page(cs, cursor)
	}
	out := []T{}
	for _, s := range g.liveSessions() {
		items, err := all(ctx, s.cs)
		if err != nil {
			return nil, "", fmt.Errorf("upstream %s: %w", s.name, err)
		}
		out = append(out, items...)
		if len(out) > maxForwardedItems {
			return nil, "", fmt.Errorf("more than %d %s", maxForwardedItems, what)
		}
	}
	return out, "", nil
}

// listResources lists the upstreams' resources (forwardList).
func (g *Gateway) listResources(ctx context.Context, p *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	rs, next, err := forwardList(ctx, g, cursor, "resources", func(cs *mcp.ClientSession, c string) ([]*mcp.Resource, string, error) {
		r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: c})
		if err != nil {
			return nil, "", err
		}
		return r.Resources, r.NextCursor, nil
	}, allResources)
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourcesResult{Resources: rs, NextCursor: next}, nil
}

// listTemplates lists the upstreams' resource templates (forwardList).
func (g *Gateway) listTemplates(ctx context.Context, p *mcp.ListResourceTemplatesParams) (*mcp.ListResourceTemplatesResult, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	ts, next, err := forwardList(ctx, g, cursor, "resource templates", func(cs *mcp.ClientSession, c string) ([]*mcp.ResourceTemplate, string, error) {
		r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: c})
		if err != nil {
			return nil, "", err
		}
		return r.ResourceTemplates, r.NextCursor, nil
	}, allTemplates)
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: ts, NextCursor: next}, nil
}

// listPrompts lists the upstreams' prompts (forwardList).
func (g *Gateway) listPrompts(ctx context.Context, p *mcp.ListPromptsParams) (*mcp.ListPromptsResult, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	ps, next, err := forwardList(ctx, g, cursor, "prompts", func(cs *mcp.ClientSession, c string) ([]*mcp.Prompt, string, error) {
		r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: c})
		if err != nil {
			return nil, "", err
		}
		return r.Prompts, r.NextCursor, nil
	}, allPrompts)
	if err != nil {
		return nil, err
	}
	return &mcp.ListPromptsResult{Prompts: ps, NextCursor: next}, nil
}

// collect reads a whole listing from an SDK iterator, bounded.
func collect[T any](seq func(func(T, error) bool)) ([]T, error) {
	var out []T
	for x, err := range seq {
		if err != nil {
			return nil, err
		}
		out = append(out, x)
		if len(out) > maxForwardedItems {
			return nil, fmt.Errorf("more than %d items", maxForwardedItems)
		}
	}
	return out, nil
}

func allResources(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Resource, error) {
	return collect(cs.Resources(ctx, nil))
}

func allTemplates(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.ResourceTemplate, error) {
	return collect(cs.ResourceTemplates(ctx, nil))
}

func allPrompts(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Prompt, error) {
	return collect(cs.Prompts(ctx, nil))
}

// pick is the one upstream of live that offers what has reports, or an
// error naming none or the several that do.
func pick(what string, live []namedSession, has func(*mcp.ClientSession) (bool, error)) (*mcp.ClientSession, error) {
	var found []namedSession
	for _, s := range live {
		ok, err := has(s.cs)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", s.name, err)
		}
		if ok {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no connected upstream offers %s", what)
	case 1:
		return found[0].cs, nil
	}
	names := make([]string, len(found))
	for i, s := range found {
		names[i] = s.name
	}
	return nil, fmt.Errorf("%s is offered by several upstreams (%s): the gateway does not guess", what, strings.Join(names, ", "))
}

// resourceUpstream routes a resource URI: to the only upstream, or to the
// one upstream whose resources/list holds the URI or whose
// resources/templates/list has a template matching it.
func (g *Gateway) resourceUpstream(ctx context.Context, uri string) (*mcp.ClientSession, error) {
	if cs, one, err := g.single(); one {
		return cs, err
	}
	return pick(fmt.Sprintf("the resource %q", uri), g.liveSessions(), func(cs *mcp.ClientSession) (bool, error) {
		rs, err := allResources(ctx, cs)
		if err != nil {
			return false, err
		}
		if slices.ContainsFunc(rs, func(r *mcp.Resource) bool { return r != nil && r.URI == uri }) {
			return true, nil
		}
		ts, err := allTemplates(ctx, cs)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(ts, func(t *mcp.ResourceTemplate) bool {
			if t == nil {
				return false
			}
			tmpl, err := uritemplate.New(t.URITemplate)
			return err == nil && tmpl.Match(uri) != nil
		}), nil
	})
}

// templateUpstream routes a completion of a resource template: to the
// only upstream, or the one that lists the template.
func (g *Gateway) templateUpstream(ctx context.Context, tmpl string) (*mcp.ClientSession, error) {
	if cs, one, err := g.single(); one {
		return cs, err
	}
	return pick(fmt.Sprintf("the resource template %q", tmpl), g.liveSessions(), func(cs *mcp.ClientSession) (bool, error) {
		ts, err := allTemplates(ctx, cs)
		return slices.ContainsFunc(ts, func(t *mcp.ResourceTemplate) bool { return t != nil && t.URITemplate == tmpl }), err
	})
}

// promptUpstream routes a prompt: to the only upstream, or the one whose
// prompts/list names it.
func (g *Gateway) promptUpstream(ctx context.Context, name string) (*mcp.ClientSession, error) {
	if cs, one, err := g.single(); one {
		return cs, err
	}
	return pick(fmt.Sprintf("the prompt %q", name), g.liveSessions(), func(cs *mcp.ClientSession) (bool, error) {
		ps, err := allPrompts(ctx, cs)
		return slices.ContainsFunc(ps, func(p *mcp.Prompt) bool { return p != nil && p.Name == name }), err
	})
}
