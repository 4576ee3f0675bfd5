package facts

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxArgsSchemaExpansion bounds the work of validating one value against a
// tool's parameters_json_schema: the number of subschemas the schema
// expands to with every $ref followed (each reference counted as a copy of
// what it refers to; a reference back into a schema that holds it, a
// recursion, counted once). A schema past it is refused when the registry
// loads: anyOf over $refs nested n deep expands to 2^n subschemas, which
// the validator would visit one by one on a call (issue 43: 13.6 s and
// 3.9 GB for 2^22, under a 2 KB request).
const MaxArgsSchemaExpansion = 10000

// checkExpansion returns the JSON pointer, inside the schema, of the
// subschema where the expansion of sch passes MaxArgsSchemaExpansion (the
// deepest one whose own expansion passes it), and an error; "" and nil
// when it stays within.
func checkExpansion(sch *jsonschema.Schema) (ptr string, err error) {
	w := expansionWalk{size: map[*jsonschema.Schema]int{}, onStack: map[*jsonschema.Schema]bool{}}
	if w.expand(sch) <= MaxArgsSchemaExpansion {
		return "", nil
	}
	return w.pointer(), fmt.Errorf("parameters_json_schema expands to more than %d subschemas with its $refs followed "+
		"(the limit bounds the work of validating a call; a $ref counts as a copy of what it refers to): "+
		"refer to fewer alternatives, or merge them", MaxArgsSchemaExpansion)
}

type expansionWalk struct {
	size    map[*jsonschema.Schema]int
	onStack map[*jsonschema.Schema]bool
	// over is the deepest subschema found whose expansion passes the
	// limit.
	over *jsonschema.Schema
}

// expand returns the expansion of s, saturated just past the limit.
func (w *expansionWalk) expand(s *jsonschema.Schema) int {
	if s == nil {
		return 0
	}
	if n, ok := w.size[s]; ok {
		return n
	}
	if w.onStack[s] {
		return 1 // a recursion: bounded by the value's own depth
	}
	w.onStack[s] = true
	n := 1
	add := func(c *jsonschema.Schema) {
		n = min(n+w.expand(c), MaxArgsSchemaExpansion+1)
	}
	add(s.Ref)
	add(s.RecursiveRef)
	if s.DynamicRef != nil {
		add(s.DynamicRef.Ref)
	}
	add(s.Not)
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		for _, c := range list {
			add(c)
		}
	}
	for _, c := range []*jsonschema.Schema{s.If, s.Then, s.Else, s.PropertyNames, s.UnevaluatedProperties,
		s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema} {
		add(c)
	}
	for _, c := range s.Properties {
		add(c)
	}
	for _, c := range s.PatternProperties {
		add(c)
	}
	for _, c := range s.DependentSchemas {
		add(c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			add(c)
		}
	}
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			add(v)
		case []*jsonschema.Schema:
			for _, c := range v {
				add(c)
			}
		}
	}
	delete(w.onStack, s)
	w.size[s] = n
	if n > MaxArgsSchemaExpansion && w.over == nil {
		w.over = s // children are done first: the deepest one
	}
	return n
}

// pointer is the JSON pointer of w.over inside its document.
func (w *expansionWalk) pointer() string {
	if w.over == nil {
		return ""
	}
	_, frag, ok := strings.Cut(w.over.Location, "#")
	if !ok {
		return ""
	}
	if p, err := url.PathUnescape(frag); err == nil {
		return p
	}
	return frag
}
