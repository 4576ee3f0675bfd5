// Package spectable reads the rule-by-rule fact tables in
// facts/testdata/spec: one file per section of the spec
// (../shared/spec/semantics.md), each case a pydantic-ai history named
// after the rule it pins, with the facts it must produce in the shape
// `policycheck eval` prints them. The facts package runs every case
// through Derive and the Tracker, internal/cli through the eval command,
// so the three agree by construction.
package spectable

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// Case is one row of a table.
type Case struct {
	// File is the table the case comes from, Section its title.
	File, Section string
	// Rule is the spec rule the case pins (e.g. "C4", "D1.3"), Name what
	// it shows; a just-outside case says so in its name.
	Rule string `json:"rule"`
	Name string `json:"name"`
	// History is the message history, as pydantic-ai writes it.
	History json.RawMessage `json:"history"`
	// Want holds the expected facts in eval's shape: "window", "facts"
	// and "dispatch" as `policycheck eval` prints them, plus "outgoing"
	// and "dispatch"/"same_response", which only the facts package
	// checks (DropFactsOnly). Only the keys present are compared.
	Want map[string]any `json:"want"`
}

// Title names the case for t.Run: its file, rule and name.
func (c Case) Title() string {
	return strings.TrimSuffix(c.File, ".json") + "/" + c.Rule + " " + c.Name
}

// Dir is the directory of the tables and their registry, from the
// source location of this package (tests run in their own package's
// directory).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "facts", "testdata", "spec")
}

// RegistryFile is the registry every table is written against.
func RegistryFile() string { return filepath.Join(Dir(), "registry.json") }

// Load reads every table in Dir, in file order.
func Load() ([]Case, error) {
	files, err := filepath.Glob(filepath.Join(Dir(), "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Case
	for _, f := range files {
		if filepath.Base(f) == "registry.json" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Section string `json:"section"`
			Cases   []Case `json:"cases"`
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(doc.Cases) == 0 {
			return nil, fmt.Errorf("%s: no cases", f)
		}
		for _, c := range doc.Cases {
			if c.Rule == "" || c.Name == "" || c.Want == nil {
				return nil, fmt.Errorf("%s: case %q needs a rule, a name and a want", f, c.Name)
			}
			c.File, c.Section = filepath.Base(f), doc.Section
			out = append(out, c)
		}
	}
	return out, nil
}

// LoadWithRegistry reads every table (Load) and the registry they are
// written against (RegistryFile).
func LoadWithRegistry() ([]Case, *facts.Registry, error) {
	cases, err := Load()
	if err != nil {
		return nil, nil, err
	}
	reg, err := loader.ReadRegistry(RegistryFile())
	if err != nil {
		return nil, nil, err
	}
	return cases, reg, nil
}

// Diff returns how the facts f depart from the case's expectations, one
// line each (see Mismatches); none when they agree.
func (c Case) Diff(f facts.Facts) ([]string, error) {
	got, err := Normalize(Shape(f))
	if err != nil {
		return nil, err
	}
	want, err := Normalize(c.Want)
	if err != nil {
		return nil, err
	}
	return Mismatches(want, got), nil
}

// Mismatches compares got with want, both decoded JSON, where want may
// leave keys of an object out: it returns one line per difference, each
// naming its JSON pointer.
func Mismatches(want, got any) []string {
	var out []string
	var walk func(ptr string, w, g any)
	walk = func(ptr string, w, g any) {
		wm, ok := w.(map[string]any)
		if !ok {
			if !reflect.DeepEqual(w, g) {
				out = append(out, fmt.Sprintf("%s: want %s, got %s", ptrOrRoot(ptr), js(w), js(g)))
			}
			return
		}
		gm, ok := g.(map[string]any)
		if !ok {
			out = append(out, fmt.Sprintf("%s: want an object, got %s", ptrOrRoot(ptr), js(g)))
			return
		}
		keys := make([]string, 0, len(wm))
		for k := range wm {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, present := gm[k]
			if !present {
				out = append(out, fmt.Sprintf("%s/%s: missing", ptr, k))
				continue
			}
			walk(ptr+"/"+k, wm[k], gv)
		}
	}
	walk("", want, got)
	return out
}

// DropFactsOnly removes from a normalized want the keys eval does not
// print: "outgoing" (the reveal state advertisement reads) and
// "dispatch"/"same_response" (what the dispatched response holds), which
// the facts package checks.
func DropFactsOnly(want any) {
	m, ok := want.(map[string]any)
	if !ok {
		return
	}
	delete(m, "outgoing")
	if d, ok := m["dispatch"].(map[string]any); ok {
		delete(d, "same_response")
	}
}

// Normalize round-trips v through JSON, so that Go values compare with
// decoded JSON.
func Normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

func ptrOrRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Shape renders facts as `policycheck eval` prints them (the decision's
// "window", "facts" and "dispatch"), plus the keys only the facts package
// checks, so that one table of expectations serves Derive, the Tracker,
// the loader and the command line.
func Shape(f facts.Facts) map[string]any {
	doc := map[string]any{
		"window": f.Window,
		"facts": map[string]any{
			"discovered":          f.Discovered,
			"loaded":              f.Loaded,
			"returned":            f.Returned,
			"active_capabilities": f.ActiveCapabilities,
		},
		// Not printed by eval (its "advertised" reads it).
		"outgoing": map[string]any{"discovered": f.Outgoing.Discovered, "loaded": f.Outgoing.Loaded},
	}
	if d := f.Dispatch; d != nil {
		doc["dispatch"] = map[string]any{
			"provider":            d.Provider,
			"window":              d.Window,
			"loaded":              d.Loaded,
			"evidence":            map[string]any{"discovered": d.Evidence.Discovered, "loaded": d.Evidence.Loaded},
			"active_capabilities": d.ActiveCapabilities,
			// Not printed by eval (its verdicts read it).
			"same_response": map[string]any{"revealed": d.SameResponse.Revealed, "pending_loads": d.SameResponse.PendingLoads},
		}
	}
	return doc
}
