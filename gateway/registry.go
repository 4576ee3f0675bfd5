package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/facts"
)

// route is where a registry tool is served: the upstream and the tool's
// name there.
type route struct {
	upstream string
	tool     string
}

// hintLabel is the label a tool carries for an MCP annotation its
// upstream states: "upstream_hint:readOnlyHint=true". The upstream
// vouches for nothing: policies that read these labels read a claim of
// the server, not a fact (docs/gateway.md).
func hintLabel(name string, v bool) string {
	return fmt.Sprintf("upstream_hint:%s=%t", name, v)
}

// hintLabels are the labels of a tool's MCP annotations.
func hintLabels(a *mcp.ToolAnnotations) []string {
	if a == nil {
		return nil
	}
	var out []string
	if a.ReadOnlyHint {
		out = append(out, hintLabel("readOnlyHint", true))
	}
	if a.DestructiveHint != nil {
		out = append(out, hintLabel("destructiveHint", *a.DestructiveHint))
	}
	if a.IdempotentHint {
		out = append(out, hintLabel("idempotentHint", true))
	}
	if a.OpenWorldHint != nil {
		out = append(out, hintLabel("openWorldHint", *a.OpenWorldHint))
	}
	return out
}

// routes maps every registry tool to its upstream: its upstream field, or
// a NAME/ prefix naming a configured upstream. A tool that names no
// configured upstream is an error: the gateway would have nowhere to send
// it.
func routes(reg *facts.Registry, upstreams []string) (map[string]route, error) {
	out := make(map[string]route, len(reg.Tools()))
	var errs []error
	for i, t := range reg.Tools() {
		switch {
		case t.Upstream != "":
			if !slices.Contains(upstreams, t.Upstream) {
				errs = append(errs, fmt.Errorf("registry /tools/%d/upstream: tool %q names upstream %q, which no --upstream defines (defined: %s)",
					i, t.Name, t.Upstream, strings.Join(upstreams, ", ")))
				continue
			}
			out[t.Name] = route{t.Upstream, t.Name}
		default:
			prefix, rest, ok := strings.Cut(t.Name, "/")
			if !ok || rest == "" || !slices.Contains(upstreams, prefix) {
				errs = append(errs, fmt.Errorf("registry /tools/%d: tool %q names no upstream: give it \"upstream: NAME\" or name it NAME/TOOL, NAME one of the --upstream names (%s)",
					i, t.Name, strings.Join(upstreams, ", ")))
				continue
			}
			out[t.Name] = route{prefix, rest}
		}
	}
	return out, errors.Join(errs...)
}

// effectiveRegistry is the registry the gateway decides with: the
// operator's, each tool given its upstream's inputSchema where the
// registry gives none and labelled with its upstream's annotations, and
// the upstream tools imported into a capability (--import). listed holds
// each upstream's first listing (absent for an upstream that did not
// answer in time: its tools keep what the registry says).
func effectiveRegistry(base *facts.Registry, rt map[string]route, listed map[string]map[string]*mcp.Tool, imports map[string]string, warn func(tool, reason string)) (*facts.Registry, map[string]route, error) {
	tools := slices.Clone(base.Tools())
	for i := range tools {
		t := &tools[i]
		r := rt[t.Name]
		up, ok := listed[r.upstream][r.tool]
		if !ok {
			continue
		}
		if t.ParametersJSONSchema == nil && up.InputSchema != nil {
			raw, err := json.Marshal(up.InputSchema)
			if err != nil {
				return nil, nil, fmt.Errorf("upstream %s, tool %s: its inputSchema: %w", r.upstream, r.tool, err)
			}
			t.ParametersJSONSchema = raw
		}
		if t.Description == "" {
			t.Description = up.Description
		}
		t.Labels = append(slices.Clone(t.Labels), hintLabels(up.Annotations)...)
	}
	rt = maps.Clone(rt)
	mapped := map[route]bool{}
	for _, r := range rt {
		mapped[r] = true
	}
	upNames := make([]string, 0, len(imports))
	for u := range imports {
		upNames = append(upNames, u)
	}
	slices.Sort(upNames)
	for _, u := range upNames {
		capID := imports[u]
		if _, ok := base.Capability(capID); !ok {
			return nil, nil, fmt.Errorf("--import %s=%s: the registry has no capability %q", u, capID, capID)
		}
		names := make([]string, 0, len(listed[u]))
		for n := range listed[u] {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if mapped[route{u, n}] {
				continue
			}
			if _, taken := rt[n]; taken || n == facts.SearchTool || n == facts.LoadCapabilityTool {
				// Never shadow a registry tool or a meta-tool.
				continue
			}
			up := listed[u][n]
			t := facts.Tool{Name: n, Capability: capID, Description: up.Description, Labels: hintLabels(up.Annotations), Upstream: u}
			if up.InputSchema != nil {
				raw, err := json.Marshal(up.InputSchema)
				if err != nil {
					return nil, nil, fmt.Errorf("upstream %s, tool %s: its inputSchema: %w", u, n, err)
				}
				t.ParametersJSONSchema = raw
			}
			tools = append(tools, t)
			rt[n] = route{u, n}
		}
	}
	reg, err := facts.NewRegistry(base.Capabilities(), tools, facts.WithContextSchema(base.ContextSchemaJSON()))
	if err != nil && refuseBadUpstreamSchemas(base, tools, err, warn) {
		// An upstream schema the validator cannot compile now refuses
		// every call (invalid_args, saying so): give the tool a
		// parameters_json_schema in the registry to call it.
		reg, err = facts.NewRegistry(base.Capabilities(), tools, facts.WithContextSchema(base.ContextSchemaJSON()))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the registry with its upstreams' schemas and hints: %w", err)
	}
	return reg, rt, nil
}

// refusingSchema is the schema of a tool whose upstream inputSchema does
// not compile: no arguments satisfy it.
var refusingSchema = json.RawMessage(`{"not":{},"description":"the upstream's inputSchema does not compile; the registry must give this tool a parameters_json_schema"}`)

// refuseBadUpstreamSchemas replaces, in tools, each schema that came from
// an upstream (not from the registry) and that err says does not compile
// with refusingSchema. It reports whether it replaced any; an error about
// anything else is left for the caller.
func refuseBadUpstreamSchemas(base *facts.Registry, tools []facts.Tool, err error, warn func(tool, reason string)) bool {
	var leaves []error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		leaves = append(leaves, e)
	}
	walk(err)
	replaced := false
	for _, e := range leaves {
		var re *facts.RegistryError
		if !errors.As(e, &re) {
			return false
		}
		var i int
		if _, serr := fmt.Sscanf(re.Pointer, "/tools/%d/parameters_json_schema", &i); serr != nil || i < 0 || i >= len(tools) {
			return false
		}
		if own, ok := base.Tool(tools[i].Name); ok && own.ParametersJSONSchema != nil {
			return false // the registry's own schema: its author's to fix
		}
		tools[i].ParametersJSONSchema = refusingSchema
		warn(tools[i].Name, re.Msg)
		replaced = true
	}
	return replaced
}
