package contract

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Path is one field of a document (Input, FilterInput, Result), read
// from its Go type.
type Path struct {
	// Path is the field's dotted path below the document, "[]" standing
	// for each element of an array and ".*" for each value of a map keyed
	// by names ("dispatch.calls[].tool", "facts.tool_calls.*").
	Path string
	// Key is the field's JSON key (the last element of Path; "*" for a
	// map's values).
	Key string
	// Kind is how a reference goes on below the field: fieldObject,
	// fieldOpen, fieldArray, fieldLeaf or fieldMap.
	Kind string
	// Type is the JSON type the docs show ("set of strings", "string or
	// null", "object", ...).
	Type string
	// Set is true for a list of names the engine hands as a Rego set.
	Set bool
	// Optional is true for a key that may be absent (omitempty).
	Optional bool
	// Owner and Field name the Go struct type and field that define the
	// path, whose doc comment is its meaning ("" for a map's values).
	Owner, Field string
	// Doc is the meaning of a map's values (its values tag); "" else.
	Doc string
	// Names is NamesTool or NamesCapability when the field holds tool
	// names or capability ids (its names tag): a string is one, a list
	// holds them, a map is keyed by them; "" else.
	Names string
}

// The kinds of names a field may hold (Path.Names).
const (
	NamesTool       = "tool"
	NamesCapability = "capability"
)

// Open reports whether the field holds whatever the operator or the
// model sent (the context, a call's arguments): nothing below it is the
// engine's.
func (p Path) Open() bool { return p.Kind == fieldOpen }

// Map reports whether the field is an object keyed by names, whose
// values are the paths below it with ".*".
func (p Path) Map() bool { return p.Kind == fieldMap }

// InputPaths returns every path of Input, sorted.
func InputPaths() []Path { return inputPaths }

// FilterInputPaths returns every path of FilterInput, sorted.
func FilterInputPaths() []Path { return filterInputPaths }

// ResultPaths returns every path of Result, sorted.
func ResultPaths() []Path { return resultPaths }

var (
	inputPaths       = pathsOf(reflect.TypeFor[Input]())
	filterInputPaths = pathsOf(reflect.TypeFor[FilterInput]())
	resultPaths      = pathsOf(reflect.TypeFor[Result]())
)

// InputSetPaths returns the paths of Input's sets that are not inside an
// array or a map, as lists of keys, in the order the type declares them:
// the paths where the shipped gate reads a JSON document's array as a set
// (policycheck.lib.gate._input_set_paths is generated from them).
func InputSetPaths() [][]string {
	var out [][]string
	walkType(reflect.TypeFor[Input](), "", func(p Path) {
		if p.Set && !strings.ContainsAny(p.Path, "[*") {
			out = append(out, strings.Split(p.Path, "."))
		}
	})
	return out
}

// Keys returns, sorted and once each, every JSON key of Input,
// FilterInput and Result: the engine builds a term for each once.
func Keys() []string {
	seen := map[string]bool{}
	var out []string
	for _, ps := range [][]Path{inputPaths, filterInputPaths, resultPaths} {
		for _, p := range ps {
			if p.Key != "*" && !seen[p.Key] {
				seen[p.Key] = true
				out = append(out, p.Key)
			}
		}
	}
	sort.Strings(out)
	return out
}

// kinds maps each path of ps to its Kind, as the reference checks read
// them.
func kinds(ps []Path) map[string]string {
	out := make(map[string]string, len(ps))
	for _, p := range ps {
		out[p.Path] = p.Kind
	}
	return out
}

func pathsOf(t reflect.Type) []Path {
	var out []Path
	walkType(t, "", func(p Path) { out = append(out, p) })
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// walkType calls each for every field of struct type t, in declaration
// order, each before the paths below it. A type it cannot map to a JSON
// document is a programming error: it panics when the package loads.
func walkType(t reflect.Type, prefix string, each func(Path)) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("json")
		if !ok || tag == "-" {
			panic(fmt.Sprintf("contract: %s.%s has no json key", t.Name(), f.Name))
		}
		key, opts, _ := strings.Cut(tag, ",")
		p := Path{Path: key, Key: key, Optional: opts == "omitempty", Owner: t.Name(), Field: f.Name,
			Set: f.Tag.Get("rego") == "set", Names: f.Tag.Get("names")}
		if p.Names != "" && p.Names != NamesTool && p.Names != NamesCapability {
			panic(fmt.Sprintf("contract: %s.%s: names %q is neither %q nor %q", t.Name(), f.Name, p.Names, NamesTool, NamesCapability))
		}
		if prefix != "" {
			p.Path = prefix + "." + key
		}
		ft := f.Type
		nullable := false
		if ft.Kind() == reflect.Pointer {
			ft, nullable = ft.Elem(), true
		}
		var below func()
		switch {
		case ft == rawMessage || ft.Kind() == reflect.Interface:
			p.Kind, p.Type = fieldOpen, "any"
		case ft.Kind() == reflect.Struct:
			p.Kind, p.Type = fieldObject, "object"
			below = func() { walkType(ft, p.Path, each) }
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
			p.Kind, p.Type = fieldLeaf, "array"
			if p.Set {
				p.Type = "set of strings"
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			p.Kind, p.Type = fieldArray, "array"
			below = func() { walkType(ft.Elem(), p.Path+"[]", each) }
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Slice && ft.Elem().Elem().Kind() == reflect.Struct:
			p.Kind, p.Type = fieldMap, "object"
			values := Path{Path: p.Path + ".*", Key: "*", Kind: fieldArray, Type: "array", Doc: f.Tag.Get("values")}
			below = func() {
				each(values)
				walkType(ft.Elem().Elem(), values.Path+"[]", each)
			}
		case ft.Kind() == reflect.String:
			p.Kind, p.Type = fieldLeaf, "string"
		case ft.Kind() == reflect.Int:
			p.Kind, p.Type = fieldLeaf, "number"
		case ft.Kind() == reflect.Bool:
			p.Kind, p.Type = fieldLeaf, "boolean"
		default:
			panic(fmt.Sprintf("contract: %s.%s: no JSON type for %s", t.Name(), f.Name, f.Type))
		}
		if p.Set && p.Type != "set of strings" {
			panic(fmt.Sprintf("contract: %s.%s: only a list of names is a set", t.Name(), f.Name))
		}
		if nullable && p.Kind == fieldLeaf {
			p.Type += " or null"
		}
		if jt, ok := f.Tag.Lookup("jsontype"); ok {
			p.Type = jt
		}
		each(p)
		if below != nil {
			below()
		}
	}
}
