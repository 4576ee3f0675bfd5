package loader

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// The JSON Schemas shipped with policycheck. They are documentation for
// operators as much as validators: history.schema.json states the same rules
// as the hand-written history decoder, registry.schema.json the shape of a
// registry file.
var (
	//go:embed schema/history.schema.json
	historySchema []byte
	//go:embed schema/registry.schema.json
	registrySchema []byte
)

const (
	historySchemaURL  = "https://policycheck.dev/schema/history.schema.json"
	registrySchemaURL = "https://policycheck.dev/schema/registry.schema.json"
)

// HistorySchema returns the JSON Schema (draft 2020-12) of a pydantic-ai
// message history. The slice is shared: callers must not modify it.
func HistorySchema() []byte { return historySchema }

// RegistrySchema returns the JSON Schema (draft 2020-12) of a registry file.
// The slice is shared: callers must not modify it.
func RegistrySchema() []byte { return registrySchema }

// SchemaError reports a document that does not satisfy one of the shipped
// JSON Schemas. It names the single most specific violation.
type SchemaError struct {
	File    string // the file the document came from; may be empty
	Pointer string // RFC 6901 pointer of the offending value; "" is the root
	Msg     string // short human message, e.g. "must be a string"
}

// Error renders "file: pointer: msg", with "(root)" for the empty pointer
// (and without the "file: " prefix when File is empty).
func (e *SchemaError) Error() string {
	ptr := e.Pointer
	if ptr == "" {
		ptr = "(root)"
	}
	if e.File == "" {
		return ptr + ": " + e.Msg
	}
	return e.File + ": " + ptr + ": " + e.Msg
}

// compiled is a schema compiled at most once, on first use.
type compiled struct {
	once sync.Once
	url  string
	src  []byte
	sch  *jsonschema.Schema
	err  error
}

func (c *compiled) get() (*jsonschema.Schema, error) {
	c.once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.src))
		if err != nil {
			c.err = fmt.Errorf("parse %s: %w", c.url, err)
			return
		}
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(jsonschema.Draft2020)
		if err := comp.AddResource(c.url, doc); err != nil {
			c.err = fmt.Errorf("add %s: %w", c.url, err)
			return
		}
		c.sch, c.err = comp.Compile(c.url)
	})
	return c.sch, c.err
}

var (
	historyCompiled  = &compiled{url: historySchemaURL, src: historySchema}
	registryCompiled = &compiled{url: registrySchemaURL, src: registrySchema}
)

// ValidateHistorySchema validates a decoded JSON document (as produced by
// jsonschema.UnmarshalJSON or encoding/json) against the history schema. On
// a violation it returns a *SchemaError naming file and the JSON pointer of
// the most specific offending value. Safe for concurrent use.
func ValidateHistorySchema(file string, doc any) error {
	return validateWith(historyCompiled, file, doc)
}

// ValidateRegistrySchema validates a decoded registry document (JSON, or
// YAML decoded to map[string]any / []any) against the registry schema. On a
// violation it returns a *SchemaError. Uniqueness of ids and names and the
// reserved tool names are not checked here. Safe for concurrent use.
func ValidateRegistrySchema(file string, doc any) error {
	return validateWith(registryCompiled, file, doc)
}

// registrySchemaErrors validates a decoded registry document against the
// registry schema and returns every violation, one per JSON pointer (the
// most specific of those at one pointer, as pickLeaf chooses), in
// document order: a registry holds no alternatives (oneOf, anyOf) whose
// unmatched branches would read as noise.
func registrySchemaErrors(file string, doc any) ([]*Error, error) {
	sch, err := registryCompiled.get()
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	verr, ok := sch.Validate(doc).(*jsonschema.ValidationError)
	if !ok || verr == nil {
		return nil, nil
	}
	type found struct {
		leaf *jsonschema.ValidationError
		msg  string
	}
	best := map[string]found{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		ptr, msg := describe(e)
		if b, seen := best[ptr]; !seen || better(e, b.leaf) {
			best[ptr] = found{e, msg}
		}
	}
	walk(verr)
	out := make([]*Error, 0, len(best))
	for ptr, f := range best {
		out = append(out, &Error{File: file, Pointer: ptr, Kind: KindSchema, Msg: f.msg})
	}
	sortByPointer(out)
	return out, nil
}

// sortByPointer orders errors by their pointers in document order
// (indices numerically), then by message.
func sortByPointer(errs []*Error) {
	slices.SortFunc(errs, func(a, b *Error) int {
		if c := slices.CompareFunc(pointerTokens(a.Pointer), pointerTokens(b.Pointer), compareToken); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
}

func pointerTokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(ptr, "/"), "/")
}

func validateWith(c *compiled, file string, doc any) error {
	sch, err := c.get()
	if err != nil {
		return fmt.Errorf("compile schema: %w", err)
	}
	err = sch.Validate(doc)
	if err == nil {
		return nil
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return &SchemaError{File: file, Msg: err.Error()}
	}
	leaf := pickLeaf(verr)
	ptr, msg := describe(leaf)
	return &SchemaError{File: file, Pointer: ptr, Msg: msg}
}

// pickLeaf returns the most specific error of the tree: among the leaves,
// the one with the deepest instance location; ties go to the smallest
// pointer, then to the kind that reads best (see kindRank), then to the
// message, so that the choice never depends on map iteration order.
func pickLeaf(root *jsonschema.ValidationError) *jsonschema.ValidationError {
	var best *jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if best == nil || better(e, best) {
			best = e
		}
	}
	walk(root)
	if best == nil {
		return root
	}
	return best
}

func better(a, b *jsonschema.ValidationError) bool {
	if la, lb := len(a.InstanceLocation), len(b.InstanceLocation); la != lb {
		return la > lb
	}
	if c := slices.CompareFunc(a.InstanceLocation, b.InstanceLocation, compareToken); c != 0 {
		return c < 0
	}
	if ra, rb := kindRank(a.ErrorKind), kindRank(b.ErrorKind); ra != rb {
		return ra < rb
	}
	return a.Error() < b.Error()
}

// compareToken orders array indices numerically and keys lexically.
func compareToken(x, y string) int {
	nx, ex := strconv.Atoi(x)
	ny, ey := strconv.Atoi(y)
	if ex == nil && ey == nil {
		return nx - ny
	}
	return strings.Compare(x, y)
}

// kindRank prefers, at one location, the error that says the most: a
// missing key, then a fixed value, then an enum, then a type.
func kindRank(k jsonschema.ErrorKind) int {
	switch k.(type) {
	case *kind.Required:
		return 0
	case *kind.Const:
		return 1
	case *kind.Enum:
		return 2
	case *kind.Type:
		return 3
	default:
		return 4
	}
}

// typedHints maps a $defs name of history.schema.json to the typed-part
// shape it enforces, appended to messages about payloads.
var typedHints = map[string]string{
	"searchArgs":   `tool-search args are {"queries": [string, ...]}, a string, or null`,
	"searchResult": `tool-search content is {"discovered_tools": [{"name": string}, ...], "message"?: string}`,
	"loadArgs":     `capability-load args are {"id": string}, a string, or null`,
	"loadResult":   `capability-load content is an object with an optional string "instructions"`,
}

// typedKinds maps the $defs that fix a typed part's tool_name to its tool_kind.
var typedKinds = map[string]string{
	"searchToolsCall":        "tool-search",
	"searchToolsReturn":      "tool-search",
	"nativeToolSearchCall":   "tool-search",
	"nativeToolSearchReturn": "tool-search",
	"loadCapabilityCall":     "capability-load",
	"loadCapabilityReturn":   "capability-load",
}

var (
	requestPartKinds  = []string{"system-prompt", "user-prompt", "speech", "tool-return", "retry-prompt", "tool-availability-delta"}
	responsePartKinds = []string{"text", "thinking", "compaction", "file", "speech", "tool-call", "builtin-tool-call", "builtin-tool-return"}
)

// describe renders the pointer and a short message for one leaf error.
func describe(e *jsonschema.ValidationError) (string, string) {
	loc := e.InstanceLocation
	def := defName(e.SchemaURL)
	var msg string
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		msg = "must be " + typeList(k.Want) + ", not " + article(k.Got)
	case *kind.Required:
		keys := quoteAll(k.Missing)
		if len(k.Missing) == 1 {
			msg = "missing required key " + keys
		} else {
			msg = "missing required keys " + keys
		}
		if slices.Equal(k.Missing, []string{"tool_name"}) {
			switch def {
			case "toolCallPart", "toolReturnPart":
				msg += " (required when tool_kind is absent or null)"
			case "builtinToolCallPart", "builtinToolReturnPart":
				msg += ` (required unless tool_kind is "tool-search")`
			}
		}
	case *kind.Enum:
		msg = enumMsg(loc, k)
	case *kind.Const:
		msg = "must be " + display(k.Want)
		if tk, ok := typedKinds[def]; ok {
			msg += fmt.Sprintf(" when tool_kind is %q", tk)
		}
	case *kind.AdditionalProperties:
		props := slices.Sorted(slices.Values(k.Properties))
		loc = append(slices.Clone(loc), props[0])
		msg = "unknown key " + strconv.Quote(props[0])
	case *kind.MinLength:
		if k.Want == 1 {
			msg = "must not be empty"
		} else {
			msg = fmt.Sprintf("must be at least %d characters long", k.Want)
		}
	case *kind.Minimum:
		msg = "must be >= " + k.Want.RatString()
	default:
		msg = e.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	}
	if hint, ok := typedHints[def]; ok {
		msg += " (" + hint + ")"
	}
	return pointer(loc), msg
}

// enumMsg explains a value outside an enum; for part_kind it says whether
// the kind is unknown or belongs to the other message kind.
func enumMsg(loc []string, k *kind.Enum) string {
	if n := len(loc); n == 4 && loc[1] == "parts" && loc[3] == "part_kind" {
		got, ok := k.Got.(string)
		if !ok {
			return "part_kind must be a string, not " + article(jsonTypeOf(k.Got))
		}
		msgKind := "request"
		if slices.Contains(asStrings(k.Want), responsePartKinds[0]) {
			msgKind = "response"
		}
		if slices.Contains(requestPartKinds, got) || slices.Contains(responsePartKinds, got) {
			return fmt.Sprintf("%q is not allowed in a %s", got, msgKind)
		}
		return fmt.Sprintf("unknown part_kind %q", got)
	}
	want := make([]string, len(k.Want))
	for i, w := range k.Want {
		want[i] = display(w)
	}
	return display(k.Got) + " is not one of " + strings.Join(want, ", ")
}

// defName returns the last $defs name in a schema location, or "".
func defName(schemaURL string) string {
	_, frag, ok := strings.Cut(schemaURL, "#")
	if !ok {
		return ""
	}
	toks := strings.Split(frag, "/")
	for i := len(toks) - 2; i >= 0; i-- {
		if toks[i] == "$defs" || toks[i] == "%24defs" {
			return toks[i+1]
		}
	}
	return ""
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(PointerToken(tok))
	}
	return b.String()
}

// typeOrder is the order in which typeList names types: strings first,
// null last.
var typeOrder = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

func typeList(types []string) string {
	types = slices.Clone(types)
	slices.SortStableFunc(types, func(a, b string) int {
		return slices.Index(typeOrder, a) - slices.Index(typeOrder, b)
	})
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = article(t)
	}
	switch len(parts) {
	case 0:
		return "of another type"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// article names a JSON Schema type with its indefinite article.
func article(t string) string {
	switch t {
	case "null":
		return "null"
	case "object", "array", "integer":
		return "an " + t
	default:
		return "a " + t
	}
}

func jsonTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return "number"
	}
}

func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func asStrings(vs []any) []string {
	var out []string
	for _, v := range vs {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
