package loader

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
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
	return decodeHistory(file, data, lim, nil)
}

func decodeHistory(file string, data []byte, lim Limits, tr *Transcript) (facts.History, error) {
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return nil, overBytes(file, len(data), lim.MaxBytes)
	}
	d := &historyDecoder{Scanner: wire.Scanner{Data: data, File: file, MaxDepth: lim.depth()}, lim: lim, tr: tr}
	h, err := d.history()
	if err != nil {
		return nil, err
	}
	if d.Peek(); d.I < len(d.Data) { // a NUL byte is data, not the end
		return nil, d.Syntax("invalid JSON: unexpected data after the history")
	}
	return h, nil
}

// DecodeMessages decodes a JSON array of messages to append to a history
// that already holds offset messages: error pointers count from offset.
func DecodeMessages(file string, data []byte, offset int, lim Limits) ([]facts.Message, error) {
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return nil, overBytes(file, len(data), lim.MaxBytes)
	}
	d := &historyDecoder{Scanner: wire.Scanner{Data: data, File: file, MaxDepth: lim.depth()}, lim: lim, offset: offset}
	h, err := d.history()
	if err != nil {
		return nil, err
	}
	if d.Peek(); d.I < len(d.Data) { // a NUL byte is data, not the end
		return nil, d.Syntax("invalid JSON: unexpected data after the messages")
	}
	return h, nil
}

func overBytes(file string, n int, max int64) *Error {
	return &Error{File: file, Kind: KindLimit, Msg: fmt.Sprintf("input is %d bytes, over the limit of %d", n, max)}
}

type historyDecoder struct {
	wire.Scanner
	lim        Limits
	offset     int
	totalParts int
	parts      []facts.Part      // scratch buffer reused across messages
	interned   map[string]string // see internAt
	// tr, when set, receives what each message and part says for a
	// reader (DecodeTranscript); texts is its scratch buffer of one
	// message's part texts.
	tr    *Transcript
	texts [][]byte
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
	if d.Peek() != '[' {
		if _, err := d.SkipValue(); err != nil {
			return nil, err
		}
		return nil, d.Fail(KindSchema, "a history must be an array of messages")
	}
	h := make(facts.History, 0, 16)
	err := d.Array(func(i int) *Error {
		// Pointers count from the messages the history already holds.
		d.Path[len(d.Path)-1].Idx = d.offset + i
		if d.lim.MaxMessages > 0 && d.offset+i >= d.lim.MaxMessages {
			return d.Fail(KindLimit, "more than %d messages", d.lim.MaxMessages)
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

// messageKeyNames are the message keys the decoder reads, by index:
// messageKey maps each back to its index (TestDecoderKeysAreTheSchemas
// holds them to each other and to the schema's).
var messageKeyNames = [mCount]string{
	mKind: "kind", mParts: "parts", mTimestamp: "timestamp", mInstructions: "instructions",
	mRunID: "run_id", mConversationID: "conversation_id", mMetadata: "metadata", mState: "state",
	mUsage: "usage", mModelName: "model_name", mProviderName: "provider_name", mProviderURL: "provider_url",
	mProviderDetails: "provider_details", mVendorDetails: "vendor_details",
	mProviderResponseID: "provider_response_id", mVendorID: "vendor_id", mFinishReason: "finish_reason",
}

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
	if d.Peek() != '{' {
		if _, err := d.SkipValue(); err != nil {
			return m, err
		}
		return m, d.Fail(KindSchema, "a message must be an object")
	}
	var spans [mCount]wire.Span
	parts := d.parts[:0]
	var partsSeen bool
	err := d.Object(func(key []byte) *Error {
		k, known := messageKey(key)
		if !known {
			_, err := d.SkipValue()
			return err
		}
		if k == mParts {
			if d.Peek() != '[' {
				sp, err := d.SkipValue()
				if err != nil {
					return err
				}
				spans[mParts] = sp
				return nil
			}
			partsSeen = true
			parts = parts[:0]
			d.texts = d.texts[:0]
			s := d.I
			err := d.Array(func(j int) *Error {
				if d.lim.MaxPartsPerMessage > 0 && j >= d.lim.MaxPartsPerMessage {
					return d.Fail(KindLimit, "more than %d parts in one message", d.lim.MaxPartsPerMessage)
				}
				d.totalParts++
				if d.lim.MaxParts > 0 && d.totalParts > d.lim.MaxParts {
					return d.Fail(KindLimit, "more than %d parts in the history", d.lim.MaxParts)
				}
				p, err := d.part()
				if err != nil {
					return err
				}
				parts = append(parts, p)
				return nil
			})
			spans[mParts] = wire.Span{S: s, E: d.I}
			return err
		}
		sp, err := d.SkipValue()
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
	if !spans[mParts].Present() {
		return m, d.Fail(KindSchema, "missing required key \"parts\"")
	}
	if !partsSeen || d.Data[spans[mParts].S] != '[' {
		return m, d.typeErr(spans[mParts], "parts", tArray)
	}
	// vendor_details and vendor_id are the legacy input aliases of
	// provider_details and provider_response_id: when the current name is
	// present the reference reads it and ignores the alias, whatever the
	// alias holds.
	if spans[mProviderDetails].Present() {
		spans[mVendorDetails] = wire.Span{}
	}
	if spans[mProviderResponseID].Present() {
		spans[mVendorID] = wire.Span{}
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
	if sp := spans[mTimestamp]; sp.Present() && d.Data[sp.S] != 'n' {
		m.Timestamp = d.Data[sp.S:sp.E]
	}
	if m.Kind == facts.Response {
		if spans[mFinishReason].Present() && d.Data[spans[mFinishReason].S] != 'n' {
			if _, err := d.enumAt(spans[mFinishReason], "finish_reason", finishReasons, false); err != nil {
				return m, err
			}
		}
		if sp := spans[mProviderName]; sp.Present() && d.Data[sp.S] == '"' {
			m.Provider, err = d.internAt(sp, "provider_name")
			if err != nil {
				return m, err
			}
			m.HasProvider = true
		}
	}
	for j := range parts {
		if !parts[j].Kind.AllowedIn(m.Kind) {
			d.Push("parts")
			d.PushIdx(j)
			d.Push("part_kind")
			return m, d.Fail(KindSchema, "%q is not allowed in a %s", parts[j].Kind.String(), m.Kind)
		}
	}
	d.parts = parts
	// Never nil, whether or not the decoder has held parts before: a
	// history decoded in pieces equals the history decoded whole.
	m.Parts = append(make([]facts.Part, 0, len(parts)), parts...)
	if d.tr != nil {
		tm := TranscriptMessage{Texts: append([][]byte(nil), d.texts...)}
		if tm.Model, err = d.shownString(spans[mModelName], "model_name"); err != nil {
			return m, err
		}
		if tm.Provider, err = d.shownString(spans[mProviderName], "provider_name"); err != nil {
			return m, err
		}
		d.tr.Messages = append(d.tr.Messages, tm)
	}
	return m, nil
}

// shownString is the string at sp, "" when it is absent or not a string.
func (d *historyDecoder) shownString(sp wire.Span, name string) (string, *Error) {
	if !sp.Present() || d.Data[sp.S] != '"' {
		return "", nil
	}
	return d.internAt(sp, name)
}

func (d *historyDecoder) checkType(sp wire.Span, name string, allowed jtype) *Error {
	if !sp.Present() {
		return nil
	}
	if typeOf(d.Data[sp.S])&allowed == 0 {
		return d.typeErr(sp, name, allowed)
	}
	return nil
}

func (d *historyDecoder) typeErr(sp wire.Span, name string, allowed jtype) *Error {
	d.Push(name)
	defer d.Pop()
	return d.Fail(KindSchema, "must be %s, not %s", allowed, typeOf(d.Data[sp.S]))
}

// stringAt decodes the string at sp (already validated as a string).
func (d *historyDecoder) stringAt(sp wire.Span, name string) (string, *Error) {
	var out string
	err := d.At(sp, name, func() *Error {
		var err *Error
		out, err = d.ReadString()
		return err
	})
	return out, err
}

// plainString returns the raw contents of the (validated) string at sp
// when it holds no escape, the common case, without allocating.
func (d *historyDecoder) plainString(sp wire.Span) ([]byte, bool) {
	raw := d.Data[sp.S+1 : sp.E-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	return raw, true
}

// maxInterned bounds the strings one decode interns.
const maxInterned = 4096

// internAt decodes the string at sp, sharing one copy of each distinct
// value: tool and provider names repeat across a history.
func (d *historyDecoder) internAt(sp wire.Span, name string) (string, *Error) {
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
func (d *historyDecoder) enumAt(sp wire.Span, name string, allowed []string, required bool) (string, *Error) {
	if !sp.Present() {
		if required {
			return "", d.Fail(KindSchema, "missing required key %q", name)
		}
		return "", nil
	}
	if d.Data[sp.S] != '"' {
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
		d.Push(name)
		defer d.Pop()
		return "", d.Fail(KindSchema, "%q is not one of %s", s, quoteList(allowed))
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
	if d.Peek() != '{' {
		if _, err := d.SkipValue(); err != nil {
			return p, err
		}
		return p, d.Fail(KindSchema, "a part must be an object")
	}
	var sp [pCount]wire.Span
	err := d.Object(func(key []byte) *Error {
		v, err := d.SkipValue()
		if k, known := partKey(key); known {
			sp[k] = v
		}
		return err
	})
	if err != nil {
		return p, err
	}
	if d.tr != nil {
		d.texts = append(d.texts, d.shownText(&sp))
	}
	if !sp[pPartKind].Present() {
		return p, d.Fail(KindSchema, "missing required key \"part_kind\"")
	}
	if d.Data[sp[pPartKind].S] != '"' {
		return p, d.typeErr(sp[pPartKind], "part_kind", tString)
	}
	kindName, err := d.internAt(sp[pPartKind], "part_kind")
	if err != nil {
		return p, err
	}
	kind, ok := facts.ParsePartKind(kindName)
	if !ok {
		d.Push("part_kind")
		defer d.Pop()
		return p, d.Fail(KindSchema, "unknown part_kind %q", kindName)
	}
	p.Kind = kind
	for _, r := range plainRules[kind] {
		if !sp[r.key].Present() {
			if r.required {
				return p, d.Fail(KindSchema, "missing required key %q", partKeyNames[r.key])
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
		if s := sp[pToolName]; s.Present() && d.Data[s.S] == '"' {
			if p.ToolName, err = d.internAt(s, "tool_name"); err != nil {
				return p, err
			}
		}
		return p, d.callID(&p, sp[pToolCallID])
	case facts.ToolAvailabilityDelta:
		key, name := sp[pToolsAdded], "tools_added"
		if !key.Present() {
			key, name = sp[pAdded], "added"
		}
		if key.Present() {
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
		if c := sp[pContent]; c.Present() && d.Data[c.S] != 'n' {
			p.HasPayload = true
		}
		if det := sp[pProviderDetails]; det.Present() && d.Data[det.S] == '{' {
			err := d.At(det, "provider_details", func() *Error {
				return d.Object(func(key []byte) *Error {
					if string(key) == "encrypted_content" {
						p.HasPayload = true
					}
					_, err := d.SkipValue()
					return err
				})
			})
			if err != nil {
				return p, err
			}
		}
	case facts.Text, facts.Thinking:
		return p, d.provider(&p, sp[pProviderName])
	case facts.SystemPrompt, facts.UserPrompt:
		// A prompt's content is a flow source (docs/flows.md).
		if c := sp[pContent]; c.Present() {
			p.Content = d.Data[c.S:c.E]
			if d.Extended {
				p.Content = wire.Standardize(p.Content)
			}
		}
	}
	return p, nil
}

// shownText is what a part says, for a reader: the raw JSON of its
// content, else of its args, tools_added or added, the first present and
// not null (nil when none).
func (d *historyDecoder) shownText(sp *[pCount]wire.Span) []byte {
	for _, k := range []int{pContent, pArgs, pToolsAdded, pAdded} {
		if v := sp[k]; v.Present() && !bytes.Equal(d.Data[v.S:v.E], []byte("null")) {
			return d.Data[v.S:v.E]
		}
	}
	return nil
}

func nonNilNames(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (d *historyDecoder) provider(p *facts.Part, s wire.Span) *Error {
	if s.Present() && d.Data[s.S] == '"' {
		var err *Error
		if p.Provider, err = d.internAt(s, "provider_name"); err != nil {
			return err
		}
		p.HasProvider = true
	}
	return nil
}

func (d *historyDecoder) callID(p *facts.Part, s wire.Span) *Error {
	if s.Present() && d.Data[s.S] == '"' {
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
func (d *historyDecoder) stringList(sp wire.Span, name string) ([]string, *Error) {
	if d.Data[sp.S] != '[' {
		return nil, d.typeErr(sp, name, tArray)
	}
	var out []string
	err := d.At(sp, name, func() *Error {
		return d.Array(func(int) *Error {
			if d.Peek() != '"' {
				return d.Fail(KindSchema, "must be a string, not %s", typeOf(d.Peek()))
			}
			s, err := d.ReadString()
			out = append(out, s)
			return err
		})
	})
	return out, err
}

func (d *historyDecoder) toolPart(p *facts.Part, sp *[pCount]wire.Span) *Error {
	kind := p.Kind
	// tool_kind: a closed enum (spec W15).
	if s := sp[pToolKind]; s.Present() && d.Data[s.S] != 'n' {
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
		if !sp[pToolName].Present() {
			return d.Fail(KindSchema, "missing required key \"tool_name\"")
		}
	}
	if s := sp[pToolName]; s.Present() {
		if d.Data[s.S] != '"' {
			return d.typeErr(s, "tool_name", tString)
		}
		name, err := d.internAt(s, "tool_name")
		if err != nil {
			return err
		}
		if fixed != "" && name != fixed {
			d.Push("tool_name")
			defer d.Pop()
			return d.Fail(KindSchema, "a %s part with tool_kind %q must be named %q, not %q", kind, p.ToolKind, fixed, name)
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
		if a := sp[pArgs]; a.Present() {
			p.Args = d.Data[a.S:a.E]
			if d.Extended {
				p.Args = wire.Standardize(p.Args)
			}
		}
		switch p.ToolKind {
		case facts.ToolKindSearch:
			return d.searchArgs(sp[pArgs])
		case facts.ToolKindLoad:
			return d.loadArgs(p, sp[pArgs])
		}
	case facts.ToolReturn, facts.BuiltinToolReturn:
		if c := sp[pContent]; c.Present() {
			p.Content = d.Data[c.S:c.E]
			if d.Extended {
				p.Content = wire.Standardize(p.Content)
			}
		}
		if kind == facts.ToolReturn {
			p.Receipt = d.receiptMetadata(sp[pMetadata])
		}
		if o := sp[pOutcome]; o.Present() {
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
func (d *historyDecoder) searchArgs(a wire.Span) *Error {
	if !a.Present() || d.Data[a.S] != '{' {
		return nil
	}
	found := false
	err := d.At(a, "args", func() *Error {
		return d.Object(func(key []byte) *Error {
			if string(key) != "queries" {
				_, err := d.SkipValue()
				return err
			}
			found = true
			if d.Peek() != '[' {
				return d.Fail(KindSchema, "must be an array of strings, not %s", typeOf(d.Peek()))
			}
			return d.Array(func(int) *Error {
				if d.Peek() != '"' {
					return d.Fail(KindSchema, "must be a string, not %s", typeOf(d.Peek()))
				}
				_, err := d.SkipValue()
				return err
			})
		})
	})
	if err != nil {
		return err
	}
	if !found {
		d.Push("args")
		defer d.Pop()
		return d.Fail(KindSchema, "a typed search call's args must have \"queries\"")
	}
	return nil
}

// loadArgs reads a typed load call's capability id (spec L2, W16).
func (d *historyDecoder) loadArgs(p *facts.Part, a wire.Span) *Error {
	if !a.Present() || d.Data[a.S] == 'n' {
		return nil
	}
	if d.Data[a.S] == '"' {
		s, err := d.stringAt(a, "args")
		if err != nil {
			return err
		}
		p.LoadID, p.HasLoadID = stringArgsID(s)
		return nil
	}
	// An object: "id" must be present and a string.
	found := false
	err := d.At(a, "args", func() *Error {
		return d.Object(func(key []byte) *Error {
			if string(key) != "id" {
				_, err := d.SkipValue()
				return err
			}
			if d.Peek() != '"' {
				return d.Fail(KindSchema, "a capability id must be a string, not %s", typeOf(d.Peek()))
			}
			id, err := d.ReadString()
			p.LoadID, p.HasLoadID, found = id, true, true
			return err
		})
	})
	if err != nil {
		return err
	}
	if !found {
		d.Push("args")
		defer d.Pop()
		return d.Fail(KindSchema, "a typed load call's args must have \"id\"")
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
	p := &wire.Scanner{Data: []byte(s), MaxDepth: DefaultMaxDepth}
	if p.Peek() != '{' {
		return "", false
	}
	id, found := "", false
	err := p.Object(func(key []byte) *Error {
		if string(key) != "id" {
			_, err := p.SkipValue()
			return err
		}
		if p.Peek() != '"' {
			id, found = "", false
			_, err := p.SkipValue()
			return err
		}
		var err *Error
		id, err = p.ReadString()
		found = true
		return err
	})
	if p.Peek(); err != nil || p.I < len(p.Data) {
		return "", false
	}
	return id, found
}

// searchContent reads a typed search return's discovered tool names.
func (d *historyDecoder) searchContent(c wire.Span) ([]string, *Error) {
	if d.Data[c.S] != '{' {
		return nil, d.typeErr(c, "content", tObject)
	}
	names := []string{}
	found := false
	err := d.At(c, "content", func() *Error {
		return d.Object(func(key []byte) *Error {
			switch string(key) {
			case "discovered_tools":
				found = true
				names = names[:0]
				if d.Peek() != '[' {
					return d.Fail(KindSchema, "must be an array of tool matches, not %s", typeOf(d.Peek()))
				}
				return d.Array(func(int) *Error {
					if d.Peek() != '{' {
						return d.Fail(KindSchema, "a tool match must be an object, not %s", typeOf(d.Peek()))
					}
					var name *string
					err := d.Object(func(key []byte) *Error {
						if string(key) != "name" {
							_, err := d.SkipValue()
							return err
						}
						if d.Peek() != '"' {
							return d.Fail(KindSchema, "must be a string, not %s", typeOf(d.Peek()))
						}
						s, err := d.ReadString()
						name = &s
						return err
					})
					if err != nil {
						return err
					}
					if name == nil {
						return d.Fail(KindSchema, "a tool match must have \"name\"")
					}
					names = append(names, *name)
					return nil
				})
			case "message":
				if d.Peek() != '"' {
					return d.Fail(KindSchema, "must be a string, not %s", typeOf(d.Peek()))
				}
			}
			_, err := d.SkipValue()
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	if !found {
		d.Push("content")
		defer d.Pop()
		return nil, d.Fail(KindSchema, "a typed search return's content must have \"discovered_tools\"")
	}
	return names, nil
}

// loadContent checks a typed load return's content: an object whose
// optional instructions are a string.
func (d *historyDecoder) loadContent(c wire.Span) *Error {
	if d.Data[c.S] != '{' {
		return d.typeErr(c, "content", tObject)
	}
	return d.At(c, "content", func() *Error {
		return d.Object(func(key []byte) *Error {
			if string(key) == "instructions" && d.Peek() != '"' {
				return d.Fail(KindSchema, "must be a string, not %s", typeOf(d.Peek()))
			}
			_, err := d.SkipValue()
			return err
		})
	})
}

// legacyMetadata reads the legacy reveal form (spec D1 item 3): metadata
// with a discovered_tools list of strings. Any other shape reveals nothing.
func (d *historyDecoder) legacyMetadata(m wire.Span) []string {
	if !m.Present() || d.Data[m.S] != '{' {
		return nil
	}
	var names []string
	ok := false
	_ = d.At(m, "metadata", func() *Error {
		return d.Object(func(key []byte) *Error {
			if string(key) != "discovered_tools" {
				_, err := d.SkipValue()
				return err
			}
			names, ok = nil, false
			if d.Peek() != '[' {
				_, err := d.SkipValue()
				return err
			}
			ok = true
			return d.Array(func(int) *Error {
				if d.Peek() != '"' {
					ok = false
					_, err := d.SkipValue()
					return err
				}
				s, err := d.ReadString()
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
func (d *historyDecoder) receiptMetadata(m wire.Span) []byte {
	if !m.Present() || d.Data[m.S] != '{' {
		return nil
	}
	var raw []byte
	_ = d.At(m, "metadata", func() *Error {
		return d.Object(func(key []byte) *Error {
			sp, err := d.SkipValue()
			if err == nil && string(key) == "policycheck_receipt" {
				raw = d.Data[sp.S:sp.E]
			}
			return err
		})
	})
	if raw != nil && d.Extended {
		raw = wire.Standardize(raw)
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
