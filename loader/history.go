package loader

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/facts"
)

// Limits bound what a decoder accepts, to protect a service from hostile
// input. A zero field means "no limit" except MaxDepth, where zero selects
// the default.
type Limits struct {
	// MaxBytes is the largest input accepted.
	MaxBytes int64
	// MaxMessages is the most messages a history may hold.
	MaxMessages int
	// MaxPartsPerMessage is the most parts one message may hold.
	MaxPartsPerMessage int
	// MaxParts is the most parts a whole history may hold.
	MaxParts int
	// MaxDepth is the most JSON arrays and objects a value may lie
	// inside, the history's own array counting as one: the nesting of the
	// containers that hold a value, so an empty [] or {} adds no level
	// (see DefaultMaxDepth).
	MaxDepth int
}

// DefaultMaxDepth is the default nesting limit, the reference's: its JSON
// parser (jiter, under pydantic-core) steps down a level only to read the
// first value of an array or object, and refuses to step down past 200,
// so a history is accepted when every value in it lies inside at most 200
// arrays and objects, the history's own array counting as one. An empty
// [] or {} is never stepped into: it may stand at the 201st level. Below
// the four levels of the history, a message, its parts and a part, tool
// arguments and return content may thus nest 196 levels (197 when the
// deepest is empty). A JSON string is one value whatever it spells; string
// tool arguments the reference parses on their own start a count of their
// own (a typed load call's capability id, facts.Part.LoadID).
const DefaultMaxDepth = 200

// DefaultLimits are the limits used when none are given: generous for
// real agent runs, small enough that one request cannot exhaust a server.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:           64 << 20,
		MaxMessages:        100_000,
		MaxPartsPerMessage: 10_000,
		MaxParts:           1_000_000,
		MaxDepth:           DefaultMaxDepth,
	}
}

func (l Limits) depth() int {
	if l.MaxDepth <= 0 {
		return DefaultLimits().MaxDepth
	}
	return l.MaxDepth
}

// DecodeHistory decodes a pydantic-ai message history (a JSON array of
// messages as ModelMessagesTypeAdapter writes it) into the facts model.
//
// It enforces the same rules as the shipped JSON Schema
// (loader/schema/history.schema.json) in a single pass, so nothing the
// schema rejects gets through this faster path: the reference's strictness
// where it rejects (unknown kind or part_kind, a part in the wrong message
// kind, an unknown tool_kind, a typed part whose payload does not validate,
// a literal field with an unknown value) and its leniency where it accepts
// (unknown extra keys, the legacy aliases added, vendor_details and
// vendor_id). file names the input in errors; every error is an *Error.
//
// The number extensions NaN, Infinity and -Infinity, which the
// reference's JSON parser accepts in any value, are accepted where any
// JSON value is, and reach policies in Part.Args as the strings "NaN",
// "Infinity" and "-Infinity": they are not JSON numbers. A lone UTF-16
// surrogate escape is rejected, as the reference rejects it.
//
// The returned history's Part.Args alias data: data must not be modified
// while the history is in use.
func DecodeHistory(file string, data []byte, lim Limits) (facts.History, error) {
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return nil, overBytes(file, len(data), lim.MaxBytes)
	}
	d := &historyDecoder{scanner: scanner{data: data, file: file, maxDepth: lim.depth()}, lim: lim}
	h, err := d.history()
	if err != nil {
		return nil, err
	}
	if d.peek(); d.i < len(d.data) { // a NUL byte is data, not the end
		return nil, d.syntax("invalid JSON: unexpected data after the history")
	}
	return h, nil
}

// DecodeMessages decodes a JSON array of messages to append to a history
// that already holds offset messages: error pointers count from offset.
func DecodeMessages(file string, data []byte, offset int, lim Limits) ([]facts.Message, error) {
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return nil, overBytes(file, len(data), lim.MaxBytes)
	}
	d := &historyDecoder{scanner: scanner{data: data, file: file, maxDepth: lim.depth()}, lim: lim, offset: offset}
	h, err := d.history()
	if err != nil {
		return nil, err
	}
	if d.peek(); d.i < len(d.data) { // a NUL byte is data, not the end
		return nil, d.syntax("invalid JSON: unexpected data after the messages")
	}
	return h, nil
}

func overBytes(file string, n int, max int64) *Error {
	return &Error{File: file, Kind: KindLimit, Msg: fmt.Sprintf("input is %d bytes, over the limit of %d", n, max)}
}

type historyDecoder struct {
	scanner
	lim        Limits
	offset     int
	totalParts int
	parts      []facts.Part      // scratch buffer reused across messages
	interned   map[string]string // see internAt
}

// JSON value types, as a bit mask of what a key accepts.
type jtype uint8

const (
	tString jtype = 1 << iota
	tNumber
	tObject
	tArray
	tBool
	tNull
	tAny = tString | tNumber | tObject | tArray | tBool | tNull
)

func typeOf(c byte) jtype {
	switch c {
	case '"':
		return tString
	case '{':
		return tObject
	case '[':
		return tArray
	case 't', 'f':
		return tBool
	case 'n':
		return tNull
	}
	return tNumber
}

func (t jtype) String() string {
	var names []string
	for _, x := range []struct {
		t jtype
		n string
	}{{tString, "a string"}, {tNumber, "a number"}, {tObject, "an object"}, {tArray, "an array"}, {tBool, "a boolean"}, {tNull, "null"}} {
		if t&x.t != 0 {
			names = append(names, x.n)
		}
	}
	switch len(names) {
	case 0:
		return "nothing"
	case 1:
		return names[0]
	}
	out := names[0]
	for i, n := range names[1:] {
		if i == len(names)-2 {
			out += " or " + n
		} else {
			out += ", " + n
		}
	}
	return out
}

func (d *historyDecoder) history() (facts.History, error) {
	if d.peek() != '[' {
		if _, err := d.skipValue(); err != nil {
			return nil, err
		}
		return nil, d.fail(KindSchema, "a history must be an array of messages")
	}
	h := make(facts.History, 0, 16)
	err := d.array(func(i int) *Error {
		// Pointers count from the messages the history already holds.
		d.path[len(d.path)-1].idx = d.offset + i
		if d.lim.MaxMessages > 0 && d.offset+i >= d.lim.MaxMessages {
			return d.fail(KindLimit, "more than %d messages", d.lim.MaxMessages)
		}
		m, err := d.message()
		if err != nil {
			return err
		}
		h = append(h, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// message keys whose types are checked.
const (
	mKind = iota
	mParts
	mTimestamp
	mInstructions
	mRunID
	mConversationID
	mMetadata
	mState
	mUsage
	mModelName
	mProviderName
	mProviderURL
	mProviderDetails
	mVendorDetails
	mProviderResponseID
	mVendorID
	mFinishReason
	mCount
)

type keyRule struct {
	key   int
	name  string
	types jtype
}

var requestRules = []keyRule{
	{mTimestamp, "timestamp", tString | tNumber | tNull},
	{mInstructions, "instructions", tString | tNull},
	{mRunID, "run_id", tString | tNull},
	{mConversationID, "conversation_id", tString | tNull},
	{mMetadata, "metadata", tObject | tNull},
}

var responseRules = []keyRule{
	{mUsage, "usage", tObject},
	{mModelName, "model_name", tString | tNull},
	{mTimestamp, "timestamp", tString | tNumber | tNull},
	{mProviderName, "provider_name", tString | tNull},
	{mProviderURL, "provider_url", tString | tNull},
	{mProviderDetails, "provider_details", tObject | tNull},
	{mVendorDetails, "vendor_details", tObject | tNull},
	{mProviderResponseID, "provider_response_id", tString | tNull},
	{mVendorID, "vendor_id", tString | tNull},
	{mRunID, "run_id", tString | tNull},
	{mConversationID, "conversation_id", tString | tNull},
	{mMetadata, "metadata", tObject | tNull},
}

var (
	requestStates  = []string{"complete", "interrupted"}
	responseStates = []string{"complete", "incomplete", "suspended", "interrupted"}
	finishReasons  = []string{"stop", "length", "content_filter", "tool_call", "error"}
	outcomes       = []string{"success", "failed", "denied", "interrupted"}
)

func (d *historyDecoder) message() (facts.Message, *Error) {
	var m facts.Message
	if d.peek() != '{' {
		if _, err := d.skipValue(); err != nil {
			return m, err
		}
		return m, d.fail(KindSchema, "a message must be an object")
	}
	var spans [mCount]span
	parts := d.parts[:0]
	var partsSeen bool
	err := d.object(func(key []byte) *Error {
		k, known := messageKey(key)
		if !known {
			_, err := d.skipValue()
			return err
		}
		if k == mParts {
			if d.peek() != '[' {
				sp, err := d.skipValue()
				if err != nil {
					return err
				}
				spans[mParts] = sp
				return nil
			}
			partsSeen = true
			parts = parts[:0]
			s := d.i
			err := d.array(func(j int) *Error {
				if d.lim.MaxPartsPerMessage > 0 && j >= d.lim.MaxPartsPerMessage {
					return d.fail(KindLimit, "more than %d parts in one message", d.lim.MaxPartsPerMessage)
				}
				d.totalParts++
				if d.lim.MaxParts > 0 && d.totalParts > d.lim.MaxParts {
					return d.fail(KindLimit, "more than %d parts in the history", d.lim.MaxParts)
				}
				p, err := d.part()
				if err != nil {
					return err
				}
				parts = append(parts, p)
				return nil
			})
			spans[mParts] = span{s, d.i}
			return err
		}
		sp, err := d.skipValue()
		spans[k] = sp
		return err
	})
	if err != nil {
		return m, err
	}
	// Validate in a fixed order so that the first error is deterministic.
	kind, err := d.enumAt(spans[mKind], "kind", []string{"request", "response"}, true)
	if err != nil {
		return m, err
	}
	if kind == "request" {
		m.Kind = facts.Request
	} else {
		m.Kind = facts.Response
	}
	if !spans[mParts].present() {
		return m, d.fail(KindSchema, "missing required key \"parts\"")
	}
	if !partsSeen || d.data[spans[mParts].s] != '[' {
		return m, d.typeErr(spans[mParts], "parts", tArray)
	}
	// vendor_details and vendor_id are the legacy input aliases of
	// provider_details and provider_response_id: when the current name is
	// present the reference reads it and ignores the alias, whatever the
	// alias holds.
	if spans[mProviderDetails].present() {
		spans[mVendorDetails] = span{}
	}
	if spans[mProviderResponseID].present() {
		spans[mVendorID] = span{}
	}
	rules, states := requestRules, requestStates
	if m.Kind == facts.Response {
		rules, states = responseRules, responseStates
	}
	for _, r := range rules {
		if err := d.checkType(spans[r.key], r.name, r.types); err != nil {
			return m, err
		}
	}
	if _, err := d.enumAt(spans[mState], "state", states, false); err != nil {
		return m, err
	}
	if sp := spans[mTimestamp]; sp.present() && d.data[sp.s] != 'n' {
		m.Timestamp = d.data[sp.s:sp.e]
	}
	if m.Kind == facts.Response {
		if spans[mFinishReason].present() && d.data[spans[mFinishReason].s] != 'n' {
			if _, err := d.enumAt(spans[mFinishReason], "finish_reason", finishReasons, false); err != nil {
				return m, err
			}
		}
		if sp := spans[mProviderName]; sp.present() && d.data[sp.s] == '"' {
			m.Provider, err = d.internAt(sp, "provider_name")
			if err != nil {
				return m, err
			}
			m.HasProvider = true
		}
	}
	for j := range parts {
		if !parts[j].Kind.AllowedIn(m.Kind) {
			d.push("parts")
			d.pushIdx(j)
			d.push("part_kind")
			return m, d.fail(KindSchema, "%q is not allowed in a %s", parts[j].Kind.String(), m.Kind)
		}
	}
	d.parts = parts
	// Never nil, whether or not the decoder has held parts before: a
	// history decoded in pieces equals the history decoded whole.
	m.Parts = append(make([]facts.Part, 0, len(parts)), parts...)
	return m, nil
}

func (d *historyDecoder) checkType(sp span, name string, allowed jtype) *Error {
	if !sp.present() {
		return nil
	}
	if typeOf(d.data[sp.s])&allowed == 0 {
		return d.typeErr(sp, name, allowed)
	}
	return nil
}

func (d *historyDecoder) typeErr(sp span, name string, allowed jtype) *Error {
	d.push(name)
	defer d.pop()
	return d.fail(KindSchema, "must be %s, not %s", allowed, typeOf(d.data[sp.s]))
}

// stringAt decodes the string at sp (already validated as a string).
func (d *historyDecoder) stringAt(sp span, name string) (string, *Error) {
	var out string
	err := d.at(sp, name, func() *Error {
		var err *Error
		out, err = d.readString()
		return err
	})
	return out, err
}

// plainString returns the raw contents of the (validated) string at sp
// when it holds no escape, the common case, without allocating.
func (d *historyDecoder) plainString(sp span) ([]byte, bool) {
	raw := d.data[sp.s+1 : sp.e-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	return raw, true
}

// maxInterned bounds the strings one decode interns.
const maxInterned = 4096

// internAt decodes the string at sp, sharing one copy of each distinct
// value: tool and provider names repeat across a history.
func (d *historyDecoder) internAt(sp span, name string) (string, *Error) {
	raw, ok := d.plainString(sp)
	if !ok {
		return d.stringAt(sp, name)
	}
	if s, hit := d.interned[string(raw)]; hit {
		return s, nil
	}
	s := string(raw)
	if d.interned == nil {
		d.interned = map[string]string{}
	}
	if len(d.interned) < maxInterned {
		d.interned[s] = s
	}
	return s, nil
}

// enumAt checks that the value at sp is one of the allowed strings.
func (d *historyDecoder) enumAt(sp span, name string, allowed []string, required bool) (string, *Error) {
	if !sp.present() {
		if required {
			return "", d.fail(KindSchema, "missing required key %q", name)
		}
		return "", nil
	}
	if d.data[sp.s] != '"' {
		return "", d.typeErr(sp, name, tString)
	}
	if raw, ok := d.plainString(sp); ok {
		for _, a := range allowed {
			if string(raw) == a {
				return a, nil
			}
		}
	}
	s, err := d.stringAt(sp, name)
	if err != nil {
		return "", err
	}
	if !slices.Contains(allowed, s) {
		d.push(name)
		defer d.pop()
		return "", d.fail(KindSchema, "%q is not one of %s", s, quoteList(allowed))
	}
	return s, nil
}

// part keys.
const (
	pPartKind = iota
	pToolName
	pToolCallID
	pToolKind
	pArgs
	pContent
	pMetadata
	pOutcome
	pToolsAdded
	pAdded
	pProviderName
	pProviderDetails
	pTimestamp
	pID
	pSignature
	pDynamicRef
	pCount
)

var partKeyNames = [pCount]string{
	pPartKind: "part_kind", pToolName: "tool_name", pToolCallID: "tool_call_id", pToolKind: "tool_kind",
	pArgs: "args", pContent: "content", pMetadata: "metadata", pOutcome: "outcome",
	pToolsAdded: "tools_added", pAdded: "added", pProviderName: "provider_name",
	pProviderDetails: "provider_details", pTimestamp: "timestamp", pID: "id",
	pSignature: "signature", pDynamicRef: "dynamic_ref",
}

type partRule struct {
	key      int
	types    jtype
	required bool
}

const tTimestamp = tString | tNumber | tNull

// plainRules are the per-kind key rules of untyped parts.
var plainRules = map[facts.PartKind][]partRule{
	facts.SystemPrompt: {{pContent, tString, true}, {pTimestamp, tTimestamp, false}, {pDynamicRef, tString | tNull, false}},
	facts.UserPrompt:   {{pContent, tString | tArray, true}, {pTimestamp, tTimestamp, false}},
	facts.Speech:       nil,
	facts.File:         nil,
	facts.Text: {{pContent, tString, true}, {pID, tString | tNull, false},
		{pProviderName, tString | tNull, false}, {pProviderDetails, tObject | tNull, false}},
	facts.Thinking: {{pContent, tString, true}, {pID, tString | tNull, false}, {pSignature, tString | tNull, false},
		{pProviderName, tString | tNull, false}, {pProviderDetails, tObject | tNull, false}},
	facts.Compaction: {{pContent, tString | tNull, false}, {pID, tString | tNull, false},
		{pProviderName, tString | tNull, false}, {pProviderDetails, tObject | tNull, false}},
	facts.ToolCall: {{pArgs, tObject | tString | tNull, false}, {pToolCallID, tString, false},
		{pID, tString | tNull, false}, {pProviderName, tString | tNull, false}, {pProviderDetails, tObject | tNull, false}},
	facts.BuiltinToolCall: {{pArgs, tObject | tString | tNull, false}, {pToolCallID, tString, false},
		{pID, tString | tNull, false}, {pProviderName, tString | tNull, false}, {pProviderDetails, tObject | tNull, false}},
	facts.ToolReturn: {{pContent, tAny, true}, {pToolCallID, tString, false}, {pTimestamp, tTimestamp, false}},
	facts.BuiltinToolReturn: {{pContent, tAny, true}, {pToolCallID, tString, false}, {pTimestamp, tTimestamp, false},
		{pProviderName, tString | tNull, false}, {pProviderDetails, tObject | tNull, false}},
	facts.RetryPrompt: {{pContent, tString | tArray, true}, {pToolName, tString | tNull, false},
		{pToolCallID, tString, false}, {pTimestamp, tTimestamp, false}},
	facts.ToolAvailabilityDelta: {{pToolCallID, tString | tNull, false}},
}

// fixedNames are the tool names typed parts must carry (spec W14).
func fixedName(k facts.PartKind, tk facts.ToolKind) string {
	switch {
	case tk == facts.ToolKindSearch && (k == facts.ToolCall || k == facts.ToolReturn):
		return facts.SearchTool
	case tk == facts.ToolKindSearch && (k == facts.BuiltinToolCall || k == facts.BuiltinToolReturn):
		return "tool_search"
	case tk == facts.ToolKindLoad && (k == facts.ToolCall || k == facts.ToolReturn):
		return facts.LoadCapabilityTool
	}
	return ""
}

func (d *historyDecoder) part() (facts.Part, *Error) {
	var p facts.Part
	if d.peek() != '{' {
		if _, err := d.skipValue(); err != nil {
			return p, err
		}
		return p, d.fail(KindSchema, "a part must be an object")
	}
	var sp [pCount]span
	err := d.object(func(key []byte) *Error {
		v, err := d.skipValue()
		if k, known := partKey(key); known {
			sp[k] = v
		}
		return err
	})
	if err != nil {
		return p, err
	}
	if !sp[pPartKind].present() {
		return p, d.fail(KindSchema, "missing required key \"part_kind\"")
	}
	if d.data[sp[pPartKind].s] != '"' {
		return p, d.typeErr(sp[pPartKind], "part_kind", tString)
	}
	kindName, err := d.internAt(sp[pPartKind], "part_kind")
	if err != nil {
		return p, err
	}
	kind, ok := facts.ParsePartKind(kindName)
	if !ok {
		d.push("part_kind")
		defer d.pop()
		return p, d.fail(KindSchema, "unknown part_kind %q", kindName)
	}
	p.Kind = kind
	for _, r := range plainRules[kind] {
		if !sp[r.key].present() {
			if r.required {
				return p, d.fail(KindSchema, "missing required key %q", partKeyNames[r.key])
			}
			continue
		}
		if err := d.checkType(sp[r.key], partKeyNames[r.key], r.types); err != nil {
			return p, err
		}
	}
	switch kind {
	case facts.ToolCall, facts.BuiltinToolCall, facts.ToolReturn, facts.BuiltinToolReturn:
		return p, d.toolPart(&p, &sp)
	case facts.RetryPrompt:
		if s := sp[pToolName]; s.present() && d.data[s.s] == '"' {
			if p.ToolName, err = d.internAt(s, "tool_name"); err != nil {
				return p, err
			}
		}
		return p, d.callID(&p, sp[pToolCallID])
	case facts.ToolAvailabilityDelta:
		key, name := sp[pToolsAdded], "tools_added"
		if !key.present() {
			key, name = sp[pAdded], "added"
		}
		if key.present() {
			names, err := d.stringList(key, name)
			if err != nil {
				return p, err
			}
			p.Reveals = nonNilNames(names)
		} else {
			p.Reveals = []string{}
		}
		return p, d.callID(&p, sp[pToolCallID])
	case facts.Compaction:
		if err := d.provider(&p, sp[pProviderName]); err != nil {
			return p, err
		}
		if c := sp[pContent]; c.present() && d.data[c.s] != 'n' {
			p.HasPayload = true
		}
		if det := sp[pProviderDetails]; det.present() && d.data[det.s] == '{' {
			err := d.at(det, "provider_details", func() *Error {
				return d.object(func(key []byte) *Error {
					if string(key) == "encrypted_content" {
						p.HasPayload = true
					}
					_, err := d.skipValue()
					return err
				})
			})
			if err != nil {
				return p, err
			}
		}
	case facts.Text, facts.Thinking:
		return p, d.provider(&p, sp[pProviderName])
	}
	return p, nil
}

func nonNilNames(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (d *historyDecoder) provider(p *facts.Part, s span) *Error {
	if s.present() && d.data[s.s] == '"' {
		var err *Error
		if p.Provider, err = d.internAt(s, "provider_name"); err != nil {
			return err
		}
		p.HasProvider = true
	}
	return nil
}

func (d *historyDecoder) callID(p *facts.Part, s span) *Error {
	if s.present() && d.data[s.s] == '"' {
		var err *Error
		if raw, ok := d.plainString(s); ok {
			p.ToolCallID, p.HasToolCallID = string(raw), true
			return nil
		}
		if p.ToolCallID, err = d.stringAt(s, "tool_call_id"); err != nil {
			return err
		}
		p.HasToolCallID = true
	}
	return nil
}

// stringList reads an array of strings.
func (d *historyDecoder) stringList(sp span, name string) ([]string, *Error) {
	if d.data[sp.s] != '[' {
		return nil, d.typeErr(sp, name, tArray)
	}
	var out []string
	err := d.at(sp, name, func() *Error {
		return d.array(func(int) *Error {
			if d.peek() != '"' {
				return d.fail(KindSchema, "must be a string, not %s", typeOf(d.peek()))
			}
			s, err := d.readString()
			out = append(out, s)
			return err
		})
	})
	return out, err
}

func (d *historyDecoder) toolPart(p *facts.Part, sp *[pCount]span) *Error {
	kind := p.Kind
	// tool_kind: a closed enum (spec W15).
	if s := sp[pToolKind]; s.present() && d.data[s.s] != 'n' {
		tk, err := d.enumAt(s, "tool_kind", []string{"tool-search", "capability-load"}, false)
		if err != nil {
			return err
		}
		if tk == "tool-search" {
			p.ToolKind = facts.ToolKindSearch
		} else {
			p.ToolKind = facts.ToolKindLoad
		}
	}
	fixed := fixedName(kind, p.ToolKind)
	if fixed == "" {
		// Untyped (or a combination the reference has no typed class for):
		// a plain part, whose name is required.
		p.ToolKind = facts.ToolKindNone
		if !sp[pToolName].present() {
			return d.fail(KindSchema, "missing required key \"tool_name\"")
		}
	}
	if s := sp[pToolName]; s.present() {
		if d.data[s.s] != '"' {
			return d.typeErr(s, "tool_name", tString)
		}
		name, err := d.internAt(s, "tool_name")
		if err != nil {
			return err
		}
		if fixed != "" && name != fixed {
			d.push("tool_name")
			defer d.pop()
			return d.fail(KindSchema, "a %s part with tool_kind %q must be named %q, not %q", kind, p.ToolKind, fixed, name)
		}
		p.ToolName = name
	} else {
		p.ToolName = fixed
	}
	if err := d.callID(p, sp[pToolCallID]); err != nil {
		return err
	}
	if kind == facts.BuiltinToolCall || kind == facts.BuiltinToolReturn {
		if err := d.provider(p, sp[pProviderName]); err != nil {
			return err
		}
	}
	switch kind {
	case facts.ToolCall, facts.BuiltinToolCall:
		if a := sp[pArgs]; a.present() {
			p.Args = d.data[a.s:a.e]
			if d.extended {
				p.Args = standardize(p.Args)
			}
		}
		switch p.ToolKind {
		case facts.ToolKindSearch:
			return d.searchArgs(sp[pArgs])
		case facts.ToolKindLoad:
			return d.loadArgs(p, sp[pArgs])
		}
	case facts.ToolReturn, facts.BuiltinToolReturn:
		if kind == facts.ToolReturn {
			p.Receipt = d.receiptMetadata(sp[pMetadata])
		}
		if o := sp[pOutcome]; o.present() {
			out, err := d.enumAt(o, "outcome", outcomes, false)
			if err != nil {
				return err
			}
			p.Outcome = facts.Outcome(slices.Index(outcomes, out))
		}
		switch p.ToolKind {
		case facts.ToolKindSearch:
			names, err := d.searchContent(sp[pContent])
			p.Reveals = names
			return err
		case facts.ToolKindLoad:
			return d.loadContent(sp[pContent])
		}
		if kind == facts.ToolReturn && p.ToolName == facts.SearchTool {
			p.Reveals = d.legacyMetadata(sp[pMetadata])
		}
	}
	return nil
}

// searchArgs checks typed search args: null, any string, or an object with
// a queries list of strings (spec W16).
func (d *historyDecoder) searchArgs(a span) *Error {
	if !a.present() || d.data[a.s] != '{' {
		return nil
	}
	found := false
	err := d.at(a, "args", func() *Error {
		return d.object(func(key []byte) *Error {
			if string(key) != "queries" {
				_, err := d.skipValue()
				return err
			}
			found = true
			if d.peek() != '[' {
				return d.fail(KindSchema, "must be an array of strings, not %s", typeOf(d.peek()))
			}
			return d.array(func(int) *Error {
				if d.peek() != '"' {
					return d.fail(KindSchema, "must be a string, not %s", typeOf(d.peek()))
				}
				_, err := d.skipValue()
				return err
			})
		})
	})
	if err != nil {
		return err
	}
	if !found {
		d.push("args")
		defer d.pop()
		return d.fail(KindSchema, "a typed search call's args must have \"queries\"")
	}
	return nil
}

// loadArgs reads a typed load call's capability id (spec L2, W16).
func (d *historyDecoder) loadArgs(p *facts.Part, a span) *Error {
	if !a.present() || d.data[a.s] == 'n' {
		return nil
	}
	if d.data[a.s] == '"' {
		s, err := d.stringAt(a, "args")
		if err != nil {
			return err
		}
		p.LoadID, p.HasLoadID = stringArgsID(s)
		return nil
	}
	// An object: "id" must be present and a string.
	found := false
	err := d.at(a, "args", func() *Error {
		return d.object(func(key []byte) *Error {
			if string(key) != "id" {
				_, err := d.skipValue()
				return err
			}
			if d.peek() != '"' {
				return d.fail(KindSchema, "a capability id must be a string, not %s", typeOf(d.peek()))
			}
			id, err := d.readString()
			p.LoadID, p.HasLoadID, found = id, true, true
			return err
		})
	})
	if err != nil {
		return err
	}
	if !found {
		d.push("args")
		defer d.pop()
		return d.fail(KindSchema, "a typed load call's args must have \"id\"")
	}
	return nil
}

// stringArgsID reads the capability id of a typed load call's string args
// as the reference reads it (pydantic_core.from_json): s is parsed as JSON
// on its own, by the reference's parser rules (the number extensions
// accepted, a lone surrogate escape refused) and with a nesting count of
// its own, from its outermost value, at the reference parser's fixed limit
// (DefaultMaxDepth, whatever Limits.MaxDepth the history was read with);
// the id is that of an object holding a string "id" (the last, when the
// key is repeated). Anything else, a string the reference's parser
// refuses among them, holds no id.
func stringArgsID(s string) (string, bool) {
	p := &scanner{data: []byte(s), maxDepth: DefaultMaxDepth}
	if p.peek() != '{' {
		return "", false
	}
	id, found := "", false
	err := p.object(func(key []byte) *Error {
		if string(key) != "id" {
			_, err := p.skipValue()
			return err
		}
		if p.peek() != '"' {
			id, found = "", false
			_, err := p.skipValue()
			return err
		}
		var err *Error
		id, err = p.readString()
		found = true
		return err
	})
	if p.peek(); err != nil || p.i < len(p.data) {
		return "", false
	}
	return id, found
}

// searchContent reads a typed search return's discovered tool names.
func (d *historyDecoder) searchContent(c span) ([]string, *Error) {
	if d.data[c.s] != '{' {
		return nil, d.typeErr(c, "content", tObject)
	}
	names := []string{}
	found := false
	err := d.at(c, "content", func() *Error {
		return d.object(func(key []byte) *Error {
			switch string(key) {
			case "discovered_tools":
				found = true
				names = names[:0]
				if d.peek() != '[' {
					return d.fail(KindSchema, "must be an array of tool matches, not %s", typeOf(d.peek()))
				}
				return d.array(func(int) *Error {
					if d.peek() != '{' {
						return d.fail(KindSchema, "a tool match must be an object, not %s", typeOf(d.peek()))
					}
					var name *string
					err := d.object(func(key []byte) *Error {
						if string(key) != "name" {
							_, err := d.skipValue()
							return err
						}
						if d.peek() != '"' {
							return d.fail(KindSchema, "must be a string, not %s", typeOf(d.peek()))
						}
						s, err := d.readString()
						name = &s
						return err
					})
					if err != nil {
						return err
					}
					if name == nil {
						return d.fail(KindSchema, "a tool match must have \"name\"")
					}
					names = append(names, *name)
					return nil
				})
			case "message":
				if d.peek() != '"' {
					return d.fail(KindSchema, "must be a string, not %s", typeOf(d.peek()))
				}
			}
			_, err := d.skipValue()
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	if !found {
		d.push("content")
		defer d.pop()
		return nil, d.fail(KindSchema, "a typed search return's content must have \"discovered_tools\"")
	}
	return names, nil
}

// loadContent checks a typed load return's content: an object whose
// optional instructions are a string.
func (d *historyDecoder) loadContent(c span) *Error {
	if d.data[c.s] != '{' {
		return d.typeErr(c, "content", tObject)
	}
	return d.at(c, "content", func() *Error {
		return d.object(func(key []byte) *Error {
			if string(key) == "instructions" && d.peek() != '"' {
				return d.fail(KindSchema, "must be a string, not %s", typeOf(d.peek()))
			}
			_, err := d.skipValue()
			return err
		})
	})
}

// legacyMetadata reads the legacy reveal form (spec D1 item 3): metadata
// with a discovered_tools list of strings. Any other shape reveals nothing.
func (d *historyDecoder) legacyMetadata(m span) []string {
	if !m.present() || d.data[m.s] != '{' {
		return nil
	}
	var names []string
	ok := false
	_ = d.at(m, "metadata", func() *Error {
		return d.object(func(key []byte) *Error {
			if string(key) != "discovered_tools" {
				_, err := d.skipValue()
				return err
			}
			names, ok = nil, false
			if d.peek() != '[' {
				_, err := d.skipValue()
				return err
			}
			ok = true
			return d.array(func(int) *Error {
				if d.peek() != '"' {
					ok = false
					_, err := d.skipValue()
					return err
				}
				s, err := d.readString()
				names = append(names, s)
				return err
			})
		})
	})
	if !ok {
		return nil
	}
	return nonNilNames(names)
}

// receiptMetadata returns the raw JSON of metadata.policycheck_receipt
// (facts.Part.Receipt), nil when metadata is not an object or has no
// such member. The value is read, not checked: verified evidence
// (engine) says why one that is not a receipt does not count.
func (d *historyDecoder) receiptMetadata(m span) []byte {
	if !m.present() || d.data[m.s] != '{' {
		return nil
	}
	var raw []byte
	_ = d.at(m, "metadata", func() *Error {
		return d.object(func(key []byte) *Error {
			sp, err := d.skipValue()
			if err == nil && string(key) == "policycheck_receipt" {
				raw = d.data[sp.s:sp.e]
			}
			return err
		})
	})
	if raw != nil && d.extended {
		raw = standardize(raw)
	}
	return raw
}

// messageKey maps a message key to its index; a switch on the key bytes
// compiles to comparisons without hashing or allocation.
func messageKey(key []byte) (int, bool) {
	switch string(key) {
	case "kind":
		return mKind, true
	case "parts":
		return mParts, true
	case "timestamp":
		return mTimestamp, true
	case "instructions":
		return mInstructions, true
	case "run_id":
		return mRunID, true
	case "conversation_id":
		return mConversationID, true
	case "metadata":
		return mMetadata, true
	case "state":
		return mState, true
	case "usage":
		return mUsage, true
	case "model_name":
		return mModelName, true
	case "provider_name":
		return mProviderName, true
	case "provider_url":
		return mProviderURL, true
	case "provider_details":
		return mProviderDetails, true
	case "vendor_details":
		return mVendorDetails, true
	case "provider_response_id":
		return mProviderResponseID, true
	case "vendor_id":
		return mVendorID, true
	case "finish_reason":
		return mFinishReason, true
	}
	return 0, false
}

// partKey maps a part key to its index.
func partKey(key []byte) (int, bool) {
	switch string(key) {
	case "part_kind":
		return pPartKind, true
	case "tool_name":
		return pToolName, true
	case "tool_call_id":
		return pToolCallID, true
	case "tool_kind":
		return pToolKind, true
	case "args":
		return pArgs, true
	case "content":
		return pContent, true
	case "metadata":
		return pMetadata, true
	case "outcome":
		return pOutcome, true
	case "tools_added":
		return pToolsAdded, true
	case "added":
		return pAdded, true
	case "provider_name":
		return pProviderName, true
	case "provider_details":
		return pProviderDetails, true
	case "timestamp":
		return pTimestamp, true
	case "id":
		return pID, true
	case "signature":
		return pSignature, true
	case "dynamic_ref":
		return pDynamicRef, true
	}
	return 0, false
}

// quoteList renders allowed values as the schema's messages do:
// "a", "b", "c".
func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
