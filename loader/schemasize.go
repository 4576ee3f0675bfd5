package loader

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
// It also returns the expansion, and whether the schema recurses.
func checkExpansion(sch *jsonschema.Schema, field string) (size int, recursive bool, ptr string, err error) {
	w := expansionWalk{size: map[*jsonschema.Schema]int{}, onStack: map[*jsonschema.Schema]bool{}}
	if size = w.expand(sch); size <= MaxArgsSchemaExpansion {
		return size, w.recursive, "", nil
	}
	return size, w.recursive, w.pointer(), fmt.Errorf("%s expands to more than %d subschemas with its $refs followed "+
		"(the limit bounds the work of validating a call; a $ref counts as a copy of what it refers to): "+
		"refer to fewer alternatives, or merge them", field, MaxArgsSchemaExpansion)
}

type expansionWalk struct {
	size    map[*jsonschema.Schema]int
	onStack map[*jsonschema.Schema]bool
	// over is the deepest subschema found whose expansion passes the
	// limit.
	over *jsonschema.Schema
	// recursive: a $ref leads back into a schema that holds it.
	recursive bool
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
		w.recursive = true
		return 1 // a recursion: counted per call (validationSteps)
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

// MaxArgsValidationSteps bounds the subschema visits the validator would
// make to validate one call's arguments: the visits are counted first
// (each pair of a subschema and a value of the arguments once, so the
// count costs at most this many steps), and arguments past the bound are
// refused without validating. A schema within MaxArgsSchemaExpansion can
// still cost more for large arguments, or through a recursion that
// branches: a recursive $ref under anyOf visits 2^depth subschemas for
// arguments nested depth deep.
const MaxArgsValidationSteps = 100000

// argNode is one value of the arguments, for counting: the values of an
// object (keys sorted as given) or of an array; nil for a scalar.
type argNode struct {
	keys []string
	kids []*argNode
}

// scalar stands for every scalar value: what validating one costs depends
// on the subschema alone.
var scalar = &argNode{}

func argTree(v any) *argNode {
	switch v := v.(type) {
	case map[string]any:
		n := &argNode{keys: make([]string, 0, len(v)), kids: make([]*argNode, 0, len(v))}
		for k, c := range v {
			n.keys = append(n.keys, k)
			n.kids = append(n.kids, argTree(c))
		}
		return n
	case []any:
		n := &argNode{kids: make([]*argNode, len(v))}
		for i, c := range v {
			n.kids[i] = argTree(c)
		}
		return n
	}
	return scalar
}

type stepKey struct {
	s *jsonschema.Schema
	n *argNode
}

// stepCount counts the subschema visits validating a value costs,
// saturated just past MaxArgsValidationSteps. It over-counts rather than
// under-counts: every keyword that may apply to a value counts as applied.
type stepCount struct {
	memo    map[stepKey]int
	onStack map[stepKey]bool
}

// validationSteps reports whether validating v against a stays within
// MaxArgsValidationSteps. Without a recursion, the visits are at most the
// schema's expansion for each value of v: when that product is within the
// bound, nothing more is counted (an ordinary call).
func validationSteps(a *argsSchema, v any) bool {
	if !a.recursive && a.expansion*nodes(v, MaxArgsValidationSteps) <= MaxArgsValidationSteps {
		return true
	}
	sch := a.sch
	c := stepCount{memo: map[stepKey]int{}, onStack: map[stepKey]bool{}}
	return c.count(sch, argTree(v)) <= MaxArgsValidationSteps
}

func (c *stepCount) count(s *jsonschema.Schema, n *argNode) int {
	if s == nil {
		return 0
	}
	k := stepKey{s, n}
	if v, ok := c.memo[k]; ok {
		return v
	}
	if c.onStack[k] {
		return 1 // a loop the validator refuses on its own
	}
	if len(c.memo) > MaxArgsValidationSteps {
		return MaxArgsValidationSteps + 1 // each pair counted costs a step
	}
	c.onStack[k] = true
	total := 1
	add := func(x int) { total = min(total+x, MaxArgsValidationSteps+1) }
	in := func(ch *jsonschema.Schema) { add(c.count(ch, n)) }
	in(s.Ref)
	in(s.RecursiveRef)
	if s.DynamicRef != nil {
		in(s.DynamicRef.Ref)
	}
	in(s.Not)
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, ch := range list {
			in(ch)
		}
	}
	in(s.If)
	in(s.Then)
	in(s.Else)
	for _, ch := range s.DependentSchemas {
		in(ch)
	}
	for _, d := range s.Dependencies {
		if ch, ok := d.(*jsonschema.Schema); ok {
			in(ch)
		}
	}
	if n.keys != nil {
		addl, _ := s.AdditionalProperties.(*jsonschema.Schema)
		for i, key := range n.keys {
			kid := n.kids[i]
			matched := false
			if ch, ok := s.Properties[key]; ok {
				add(c.count(ch, kid))
				matched = true
			}
			for re, ch := range s.PatternProperties {
				if re.MatchString(key) {
					add(c.count(ch, kid))
					matched = true
				}
			}
			if !matched {
				add(c.count(addl, kid))
			}
			add(c.count(s.UnevaluatedProperties, kid))
			add(c.count(s.PropertyNames, scalar))
		}
	} else if n.kids != nil {
		for i, kid := range n.kids {
			var item *jsonschema.Schema
			switch {
			case i < len(s.PrefixItems):
				item = s.PrefixItems[i]
			case s.Items2020 != nil:
				item = s.Items2020
			}
			switch items := s.Items.(type) {
			case *jsonschema.Schema:
				item = items
			case []*jsonschema.Schema:
				if i < len(items) {
					item = items[i]
				} else if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
					item = a
				}
			}
			add(c.count(item, kid))
			add(c.count(s.Contains, kid))
			add(c.count(s.UnevaluatedItems, kid))
		}
		if s.UniqueItems {
			add(len(n.kids) * len(n.kids) / 2) // pairs compared
		}
	}
	delete(c.onStack, k)
	c.memo[k] = total
	return total
}

// nodes counts the values of v (itself included), stopping past limit.
func nodes(v any, limit int) int {
	n := 1
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			if n > limit {
				break
			}
			n += nodes(c, limit-n)
		}
	case []any:
		for _, c := range v {
			if n > limit {
				break
			}
			n += nodes(c, limit-n)
		}
	}
	return n
}
