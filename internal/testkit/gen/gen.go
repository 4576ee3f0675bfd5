// Package gen generates realistic, random pydantic-ai message histories and
// matching registries for fuzzing, property tests and benchmarks.
//
// Everything is a pure function of a seed and [Options]: the same seed and
// options give the same bytes on every platform (math/rand/v2 with a PCG
// source, no global state), so a failing input is reproduced from its seed.
//
// The output is the exact wire JSON that pydantic-ai's
// ModelMessagesTypeAdapter writes (shapes copied from the shared
// conformance cases, compact as dump_json writes it): request and response
// envelopes with timestamps, usage, run and conversation ids, and every kind
// of availability evidence — plain tool calls and returns, typed local
// search exchanges, native (provider-side) search pairs, legacy metadata
// search returns, availability deltas (including the legacy "added" key),
// typed load_capability exchanges (args as an object or a JSON string),
// retry prompts, and compaction parts in the Anthropic style (content), the
// OpenAI style (provider_details.encrypted_content) and payload-less, from
// anthropic, openai, google or no provider. The legacy forms (metadata
// search returns, the "added" key) appear as in histories written by older
// pydantic-ai versions. With Options.Noise above zero it
// also writes valid but irregular histories (reused and orphaned call ids,
// untyped parts named like framework tools, partial load args, legacy
// aliases) that the rules must survive.
//
// Registry and History agree for the same seed and options: the history
// calls, searches for and loads the registry's tools and capabilities.
//
// This package is a test helper, not an API promise.
package gen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/policycheck/policycheck/internal/ground/jsonout"
)

// Options shape a generated registry and history. The zero value asks for
// an empty registry and an empty history; Default gives realistic values.
type Options struct {
	// Messages is the exact number of messages of the history.
	Messages int
	// Tools is the number of registry tools (framework tools not counted).
	Tools int
	// Capabilities is the number of registered capabilities; about half
	// of them are deferred.
	Capabilities int
	// CompactionRate is the probability that a response holds a compaction
	// part.
	CompactionRate float64
	// Noise is the probability, at each opportunity, of writing a valid but
	// irregular construct (see the package comment). 0 writes only what
	// the framework itself writes.
	Noise float64
}

// Default returns realistic options for a history of the given length.
func Default(messages int) Options {
	return Options{Messages: messages, Tools: 24, Capabilities: 4, CompactionRate: 0.03, Noise: 0.02}
}

// Stream identifiers of the two PCG streams derived from a seed.
const (
	streamRegistry = 0x7265676973747279 // "registry"
	streamHistory  = 0x686973746f727921 // "history!"
)

func newRand(seed int64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

// Registry returns the registry document (docs/registry.md, as JSON)
// that History and Messages draw their tool names from.
func Registry(seed int64, o Options) []byte {
	m := newModel(seed, o)
	caps := make([]any, 0, len(m.caps))
	for _, c := range m.caps {
		obj := object{{"id", c.id}, {"defer_loading", c.deferred}}
		if c.desc != "" {
			obj = append(obj, kv{"description", c.desc})
		}
		caps = append(caps, obj)
	}
	tools := make([]any, 0, len(m.tools))
	for _, t := range m.tools {
		obj := object{{"name", t.name}, {"capability", nullable(t.capability)}, {"defer_loading", t.deferLoading}}
		if t.desc != "" {
			obj = append(obj, kv{"description", t.desc})
		}
		if t.maxRetries >= 0 {
			obj = append(obj, kv{"max_retries", t.maxRetries})
		}
		tools = append(tools, obj)
	}
	return appendJSON(nil, object{{"capabilities", caps}, {"tools", tools}})
}

// History returns a history of exactly o.Messages messages as one JSON
// array: the elements of Messages joined with commas inside brackets.
func History(seed int64, o Options) []byte {
	return jsonout.JoinArray(Messages(seed, o))
}

// Messages returns the JSON of each message of the history separately, so
// that callers can build prefixes or append messages incrementally.
func Messages(seed int64, o Options) [][]byte {
	s := newSim(seed, o)
	out := make([][]byte, 0, max(o.Messages, 0))
	for i := 0; i < o.Messages; i++ {
		out = append(out, appendJSON(nil, s.next(i)))
	}
	return out
}

// --- registry model ---------------------------------------------------------

type capDef struct {
	id       string
	deferred bool
	desc     string
}

type toolDef struct {
	name         string
	capability   string // "" for none
	deferLoading bool
	desc         string
	maxRetries   int // -1 for absent
}

// model is the registry as the history simulation sees it.
type model struct {
	caps  []capDef
	tools []toolDef

	always      []string            // tools that need no reveal
	searchGated []string            // the search corpus
	capTools    map[string][]string // deferred capability → its tools, sorted
	deferred    []string            // deferred capability ids
}

var capIDs = []string{
	"billing", "vault", "maps", "support", "storage", "crm", "payroll", "devops",
	"analytics", "calendar", "guarded", "refunds", "hr", "legal", "security", "marketing",
}

var verbs = []string{
	"get", "list", "create", "update", "delete", "search", "export", "sync", "audit", "fetch",
	"send", "cancel", "approve", "schedule", "lookup", "generate", "validate", "archive", "merge", "issue",
}

var nouns = []string{
	"order", "invoice", "refund", "ticket", "contact", "forecast", "payroll", "event", "policy",
	"secret", "report", "shipment", "customer", "subscription", "document", "calendar", "message",
	"repo", "deploy", "metric", "alert", "user", "account", "note", "task",
}

func newModel(seed int64, o Options) *model {
	r := newRand(seed, streamRegistry)
	m := &model{capTools: map[string][]string{}}
	for i := 0; i < o.Capabilities; i++ {
		id := capIDs[i%len(capIDs)]
		if i >= len(capIDs) {
			id = fmt.Sprintf("%s_%d", id, i/len(capIDs)+1)
		}
		c := capDef{id: id, deferred: r.IntN(2) == 0}
		if r.IntN(3) > 0 {
			c.desc = sentence(r, 4+r.IntN(8))
		}
		m.caps = append(m.caps, c)
	}
	names := make([]string, 0, len(verbs)*len(nouns))
	for _, v := range verbs {
		for _, n := range nouns {
			names = append(names, v+"_"+n)
		}
	}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for i := 0; i < o.Tools; i++ {
		name := names[i%len(names)]
		if i >= len(names) {
			name = fmt.Sprintf("%s_v%d", name, i/len(names)+1)
		}
		t := toolDef{name: name, maxRetries: -1}
		if len(m.caps) > 0 && r.IntN(5) < 2 {
			t.capability = m.caps[r.IntN(len(m.caps))].id
		}
		t.deferLoading = r.IntN(5) < 2
		if r.IntN(4) > 0 {
			t.desc = sentence(r, 5+r.IntN(10))
		}
		if r.IntN(8) == 0 {
			t.maxRetries = r.IntN(4)
		}
		m.tools = append(m.tools, t)
	}
	deferred := map[string]bool{}
	for _, c := range m.caps {
		if c.deferred {
			deferred[c.id] = true
			m.deferred = append(m.deferred, c.id)
		}
	}
	for _, t := range m.tools {
		switch {
		case t.capability != "" && deferred[t.capability]:
			m.capTools[t.capability] = append(m.capTools[t.capability], t.name)
		case t.deferLoading:
			m.searchGated = append(m.searchGated, t.name)
		default:
			m.always = append(m.always, t.name)
		}
	}
	for _, names := range m.capTools {
		slices.Sort(names)
	}
	return m
}

// --- history simulation -----------------------------------------------------

type callKind uint8

const (
	callPlain callKind = iota
	callSearch
	callLoad
	callUntypedLoad   // a user tool named load_capability (W18)
	callUntypedSearch // an untyped search_tools call (legacy)
)

type pendingCall struct {
	kind    callKind
	id      string
	tool    string
	capID   string // load calls: the id asked for, "" when none parses
	refused bool   // the framework answers with a retry prompt
	unknown bool   // the name is not a tool at all
}

type sim struct {
	r *rand.Rand
	m *model
	o Options

	now      time.Time
	runID    int  // 0: messages carry no run_id
	noRunIDs bool // the whole history was passed in as message_history
	conv     string
	provider string // serving provider of the current run; "" for null
	model    string
	tokens   int

	lastKind   string
	pending    []pendingCall
	callSeq    int
	callIDs    []string // every call id so far, for reuse noise
	discovered map[string]bool
	loaded     map[string]bool
}

var providers = []string{"anthropic", "openai", "google", ""}

func newSim(seed int64, o Options) *sim {
	r := newRand(seed, streamHistory)
	s := &sim{
		r:          r,
		m:          newModel(seed, o),
		o:          o,
		now:        time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(90*24*3600)) * time.Second),
		noRunIDs:   r.IntN(4) == 0,
		conv:       "conv-" + hexString(r, 8),
		discovered: map[string]bool{},
		loaded:     map[string]bool{},
	}
	s.pickProvider()
	return s
}

func (s *sim) chance(p float64) bool { return p > 0 && s.r.Float64() < p }
func (s *sim) noise() bool           { return s.chance(s.o.Noise) }

func (s *sim) pickProvider() {
	s.provider = providers[s.r.IntN(len(providers))]
	switch s.provider {
	case "anthropic":
		s.model = []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"}[s.r.IntN(3)]
	case "openai":
		s.model = []string{"gpt-5.2", "gpt-5-mini", "gpt-4.1"}[s.r.IntN(3)]
	case "google":
		s.model = []string{"gemini-2.5-pro", "gemini-2.5-flash"}[s.r.IntN(2)]
	default:
		s.model = "function:model_fn:"
	}
}

// tick advances the clock and returns the timestamp in the serializer's
// format (microseconds only when non-zero; with noise, the other input
// forms the spec accepts).
func (s *sim) tick() any {
	s.now = s.now.Add(time.Duration(200+s.r.IntN(20_000)) * time.Millisecond)
	if s.r.IntN(3) == 0 {
		s.now = s.now.Truncate(time.Second)
	}
	if s.noise() {
		switch s.r.IntN(3) {
		case 0:
			return s.now.Unix()
		case 1:
			return s.now.Format("2006-01-02T15:04:05+00:00")
		default:
			return s.now.Format("2006-01-02 15:04:05")
		}
	}
	if s.now.Nanosecond() == 0 {
		return s.now.Format("2006-01-02T15:04:05Z")
	}
	return s.now.Format("2006-01-02T15:04:05.000000Z")
}

func (s *sim) runValue() any {
	if s.noRunIDs || s.runID == 0 {
		return nil
	}
	return "run-" + strconv.Itoa(s.runID)
}

func (s *sim) convValue() any {
	if s.noRunIDs {
		return nil
	}
	return s.conv
}

// next returns message i.
func (s *sim) next(i int) object {
	var msg object
	switch {
	case i == 0:
		msg = s.firstRequest()
	case s.lastKind == "response" && len(s.pending) > 0:
		msg = s.answerRequest()
	case s.lastKind == "response":
		msg = s.userRequest()
	case s.chance(0.03):
		// Consecutive requests: the backfill delta or a follow-up prompt
		// written as a message of its own.
		msg = s.extraRequest()
	default:
		msg = s.response()
	}
	return msg
}

func (s *sim) firstRequest() object {
	s.runID = 1
	var parts []any
	if s.r.IntN(10) < 7 {
		parts = append(parts, object{
			{"content", sentence(s.r, 12+s.r.IntN(30))},
			{"timestamp", s.tick()},
			{"dynamic_ref", nil},
			{"part_kind", "system-prompt"},
		})
	}
	parts = append(parts, s.userPrompt())
	return s.request(parts)
}

func (s *sim) userPrompt() object {
	var content any = prose(s.r, 80+s.r.IntN(300))
	if s.r.IntN(12) == 0 {
		content = []any{
			prose(s.r, 40+s.r.IntN(100)),
			object{
				{"url", "https://example.com/uploads/" + hexString(s.r, 12) + ".png"},
				{"force_download", false},
				{"vendor_metadata", nil},
				{"kind", "image-url"},
				{"media_type", "image/png"},
				{"identifier", hexString(s.r, 6)},
			},
		}
	}
	return object{{"content", content}, {"timestamp", s.tick()}, {"part_kind", "user-prompt"}}
}

// userRequest starts a new turn (and, sometimes, a new run).
func (s *sim) userRequest() object {
	if s.r.IntN(3) == 0 {
		s.runID++
		if s.r.IntN(6) == 0 {
			s.pickProvider() // a fallback model or a model switch
		}
	}
	return s.request([]any{s.userPrompt()})
}

func (s *sim) extraRequest() object {
	if names := s.backfill(); len(names) > 0 {
		return s.request([]any{s.delta(names, nil)})
	}
	return s.request([]any{s.userPrompt()})
}

func (s *sim) request(parts []any) object {
	s.lastKind = "request"
	var instructions any
	if s.r.IntN(10) < 3 {
		instructions = sentence(s.r, 10+s.r.IntN(25))
	}
	state := "complete"
	if s.noise() {
		state = "interrupted"
	}
	msg := object{
		{"parts", parts},
		{"timestamp", s.tick()},
		{"instructions", instructions},
		{"kind", "request"},
		{"run_id", s.runValue()},
		{"conversation_id", s.convValue()},
		{"metadata", nil},
		{"state", state},
	}
	if s.noise() {
		msg = append(msg, kv{"x_extra", object{{"ignored", true}}})
	}
	return msg
}

// available lists the tools the model may legitimately call now.
func (s *sim) available() []string {
	out := slices.Clone(s.m.always)
	for _, n := range s.m.searchGated {
		if s.discovered[n] {
			out = append(out, n)
		}
	}
	for _, c := range s.m.deferred {
		if s.loaded[c] {
			out = append(out, s.m.capTools[c]...)
		}
	}
	return out
}

func (s *sim) newCallID() string {
	if len(s.callIDs) > 0 && s.noise() {
		return s.callIDs[s.r.IntN(len(s.callIDs))]
	}
	s.callSeq++
	var id string
	switch s.provider {
	case "anthropic":
		id = "toolu_01" + base62(s.r, 22)
	case "openai":
		id = "call_" + base62(s.r, 24)
	case "google":
		id = "pyd_ai_" + hexString(s.r, 16)
	default:
		id = "c" + strconv.Itoa(s.callSeq)
	}
	s.callIDs = append(s.callIDs, id)
	return id
}

func (s *sim) response() object {
	s.lastKind = "response"
	s.pending = nil
	prov := s.provider
	if s.noise() {
		prov = providers[s.r.IntN(len(providers))]
	}
	var parts []any
	compaction := s.chance(s.o.CompactionRate)
	lateCompaction := compaction && s.r.IntN(5) == 0
	if compaction && !lateCompaction {
		parts = append(parts, s.compactionPart(prov))
	}
	if s.r.IntN(4) == 0 {
		var sig any
		if prov == "anthropic" {
			sig = base62(s.r, 40)
		}
		parts = append(parts, object{
			{"content", prose(s.r, 100+s.r.IntN(400))},
			{"id", nil},
			{"signature", sig},
			{"provider_name", nullable(prov)},
			{"provider_details", nil},
			{"part_kind", "thinking"},
		})
	}
	if (len(s.m.searchGated) > 0 && s.chance(0.12)) || s.noise() {
		parts = append(parts, s.nativeSearch(prov)...)
	}
	nCalls := 0
	switch x := s.r.IntN(20); {
	case x < 7:
	case x < 15:
		nCalls = 1
	case x < 18:
		nCalls = 2
	default:
		nCalls = 3
	}
	if nCalls == 0 || s.r.IntN(3) == 0 {
		parts = append(parts, object{
			{"content", prose(s.r, 120+s.r.IntN(500))},
			{"id", nil},
			{"provider_name", nullable(prov)},
			{"provider_details", nil},
			{"part_kind", "text"},
		})
	}
	if s.noise() {
		parts = append(parts, object{
			{"content", object{{"data", base62(s.r, 64)}, {"media_type", "image/png"}, {"identifier", hexString(s.r, 6)}, {"kind", "binary"}}},
			{"id", nil},
			{"provider_name", nullable(prov)},
			{"provider_details", nil},
			{"part_kind", "file"},
		})
	}
	for range nCalls {
		parts = append(parts, s.toolCall(prov))
	}
	if lateCompaction {
		at := s.r.IntN(len(parts) + 1)
		parts = slices.Insert(parts, at, any(s.compactionPart(prov)))
	}
	if compaction {
		// What the model knows after a compaction.
		clear(s.discovered)
		clear(s.loaded)
	}

	out := 10 + s.r.IntN(600)
	in := s.tokens + 200 + s.r.IntN(800)
	s.tokens = in + out
	cacheRead := 0
	if prov == "anthropic" && s.r.IntN(2) == 0 {
		cacheRead = s.r.IntN(in)
	}
	details := object{}
	if prov == "openai" {
		details = object{{"reasoning_tokens", s.r.IntN(out + 1)}}
	}
	usage := object{
		{"input_tokens", in},
		{"cache_write_tokens", 0},
		{"cache_read_tokens", cacheRead},
		{"output_tokens", out},
		{"input_audio_tokens", 0},
		{"cache_audio_read_tokens", 0},
		{"output_audio_tokens", 0},
		{"details", details},
		{"cost", nil},
	}
	if s.noise() {
		usage = object{{"request_tokens", in}, {"response_tokens", out}, {"total_tokens", in + out}, {"requests", 1}}
	}
	var finish any = "stop"
	if nCalls > 0 {
		finish = "tool_call"
	}
	if prov == "" {
		finish = nil
	}
	var url, respID any
	switch prov {
	case "anthropic":
		url, respID = "https://api.anthropic.com", "msg_01"+base62(s.r, 22)
	case "openai":
		url, respID = "https://api.openai.com/v1/", "resp_"+hexString(s.r, 24)
	case "google":
		url, respID = "https://generativelanguage.googleapis.com/v1beta/models/", base62(s.r, 20)
	}
	state := "complete"
	if s.noise() {
		state = []string{"incomplete", "suspended", "interrupted"}[s.r.IntN(3)]
	}
	detailsKey, idKey := "provider_details", "provider_response_id"
	if s.noise() {
		detailsKey, idKey = "vendor_details", "vendor_id"
	}
	return object{
		{"parts", parts},
		{"usage", usage},
		{"model_name", s.modelName(prov)},
		{"timestamp", s.tick()},
		{"kind", "response"},
		{"provider_name", nullable(prov)},
		{"provider_url", url},
		{detailsKey, nil},
		{idKey, respID},
		{"finish_reason", finish},
		{"run_id", s.runValue()},
		{"conversation_id", s.convValue()},
		{"metadata", nil},
		{"state", state},
	}
}

func (s *sim) modelName(prov string) string {
	if prov == s.provider {
		return s.model
	}
	switch prov {
	case "anthropic":
		return "claude-sonnet-4-5"
	case "openai":
		return "gpt-5.2"
	case "google":
		return "gemini-2.5-pro"
	}
	return "function:model_fn:"
}

// compactionPart writes one of the three compaction styles, usually from
// the serving provider.
func (s *sim) compactionPart(prov string) object {
	cprov := prov
	if s.r.IntN(4) == 0 {
		cprov = providers[s.r.IntN(len(providers))]
	}
	style := s.r.IntN(3)
	if s.r.IntN(3) > 0 {
		switch cprov {
		case "anthropic":
			style = 0
		case "openai":
			style = 1
		}
	}
	var id any
	if s.r.IntN(2) == 0 {
		id = "cmp_" + hexString(s.r, 8)
	}
	switch style {
	case 0: // Anthropic: a readable summary.
		content := "Summary of the conversation so far: " + prose(s.r, 150+s.r.IntN(600))
		if s.r.IntN(20) == 0 {
			content = "" // an empty string still carries a payload (C4)
		}
		return object{{"content", content}, {"id", id}, {"provider_name", nullable(cprov)}, {"provider_details", nil}, {"part_kind", "compaction"}}
	case 1: // OpenAI: encrypted content.
		var enc any = "gAAAAA" + base62(s.r, 200+s.r.IntN(600))
		if s.r.IntN(20) == 0 {
			enc = nil // the key alone carries a payload (C4)
		}
		details := object{{"encrypted_content", enc}, {"type", "compaction"}}
		if s.r.IntN(10) == 0 {
			details = append(details, kv{"pydantic_ai_standing_prompt_planted", true})
		}
		return object{{"content", nil}, {"id", id}, {"provider_name", nullable(cprov)}, {"provider_details", details}, {"part_kind", "compaction"}}
	}
	// Payload-less: a failed compaction.
	switch s.r.IntN(4) {
	case 0:
		return object{{"part_kind", "compaction"}}
	case 1:
		return object{{"content", nil}, {"id", id}, {"provider_name", nullable(cprov)}, {"provider_details", object{}}, {"part_kind", "compaction"}}
	case 2:
		return object{{"content", nil}, {"id", id}, {"provider_name", nullable(cprov)}, {"provider_details", object{{"type", "compaction"}}}, {"part_kind", "compaction"}}
	}
	return object{{"content", nil}, {"id", id}, {"provider_name", nullable(cprov)}, {"provider_details", nil}, {"part_kind", "compaction"}}
}

// corpusPick returns up to n names from the search corpus, with an
// occasional name that is no tool at all (raw evidence, D4).
func (s *sim) corpusPick(n int) []string {
	var out []string
	for range n {
		if len(s.m.searchGated) == 0 || s.noise() {
			out = append(out, s.unknownName())
			continue
		}
		out = append(out, s.m.searchGated[s.r.IntN(len(s.m.searchGated))])
	}
	return out
}

func (s *sim) unknownName() string {
	return verbs[s.r.IntN(len(verbs))] + "_" + nouns[s.r.IntN(len(nouns))] + "_" + []string{"v2", "beta", "legacy", "x"}[s.r.IntN(4)]
}

func (s *sim) searchArgs() any {
	q := []any{nouns[s.r.IntN(len(nouns))]}
	if s.r.IntN(3) == 0 {
		q = append(q, verbs[s.r.IntN(len(verbs))]+" "+nouns[s.r.IntN(len(nouns))])
	}
	switch {
	case s.noise():
		return []any{nil, "garbage", `{"queries": [`}[s.r.IntN(3)]
	case s.r.IntN(5) == 0:
		return string(appendJSON(nil, object{{"queries", q}}))
	}
	return object{{"queries", q}}
}

func (s *sim) matches(names []string) object {
	list := make([]any, 0, len(names))
	for _, n := range names {
		m := object{{"name", n}}
		if s.r.IntN(2) == 0 {
			m = append(m, kv{"description", sentence(s.r, 6+s.r.IntN(10))})
		}
		list = append(list, m)
	}
	content := object{{"discovered_tools", list}}
	if s.r.IntN(2) == 0 {
		content = append(content, kv{"message", fmt.Sprintf("Found %d tools matching the query.", len(names))})
	}
	return content
}

// nativeSearch writes a provider-side search call and its return, both in
// the response.
func (s *sim) nativeSearch(prov string) []any {
	id := "srvtoolu_" + base62(s.r, 20)
	names := s.corpusPick(1 + s.r.IntN(3))
	for _, n := range names {
		s.discovered[n] = true
	}
	return []any{
		object{
			{"tool_name", "tool_search"},
			{"args", s.searchArgs()},
			{"tool_call_id", id},
			{"tool_kind", "tool-search"},
			{"id", nil},
			{"provider_name", nullable(prov)},
			{"provider_details", nil},
			{"part_kind", "builtin-tool-call"},
		},
		object{
			{"tool_name", "tool_search"},
			{"content", s.matches(names)},
			{"tool_call_id", id},
			{"tool_kind", "tool-search"},
			{"metadata", nil},
			{"timestamp", s.tick()},
			{"outcome", "success"},
			{"provider_name", nullable(prov)},
			{"provider_details", nil},
			{"part_kind", "builtin-tool-return"},
		},
	}
}

func (s *sim) toolCall(prov string) object {
	c := pendingCall{id: s.newCallID()}
	var args any
	toolKind := any(nil)
	undiscovered := false
	for _, n := range s.m.searchGated {
		if !s.discovered[n] {
			undiscovered = true
			break
		}
	}
	unloaded := false
	for _, id := range s.m.deferred {
		if !s.loaded[id] {
			unloaded = true
			break
		}
	}
	switch x := s.r.IntN(100); {
	case unloaded && x < 20:
		c.kind, c.tool, toolKind = callLoad, "load_capability", "capability-load"
		c.capID = s.m.deferred[s.r.IntN(len(s.m.deferred))]
		if s.noise() {
			c.capID = capIDs[s.r.IntN(len(capIDs))] + "_ghost" // unknown: the load fails
		}
		switch {
		case s.noise():
			// Partial or ill-typed string args: never a load (L2).
			args = []string{`{"id":`, `{"id": 5}`, `not json`}[s.r.IntN(3)]
			c.capID = ""
		case s.r.IntN(4) == 0:
			args = string(appendJSON(nil, object{{"id", c.capID}}))
		default:
			args = object{{"id", c.capID}}
		}
	case undiscovered && x < 35:
		c.kind, c.tool, toolKind = callSearch, "search_tools", "tool-search"
		args = s.searchArgs()
	case x < 37 && s.noise():
		c.kind, c.tool = callUntypedLoad, "load_capability"
		args = object{{"id", capIDs[s.r.IntN(len(capIDs))]}}
	case x < 39 && s.noise():
		c.kind, c.tool = callUntypedSearch, "search_tools"
		args = object{{"queries", []any{nouns[s.r.IntN(len(nouns))]}}}
	default:
		c.kind = callPlain
		avail := s.available()
		switch {
		case len(avail) > 0 && s.r.IntN(100) < 88:
			c.tool = avail[s.r.IntN(len(avail))]
		case len(s.m.tools) > 0 && s.r.IntN(3) > 0:
			c.tool = s.m.tools[s.r.IntN(len(s.m.tools))].name
			c.refused = !slices.Contains(avail, c.tool)
		default:
			c.tool = s.unknownName()
			c.refused, c.unknown = true, true
		}
		args = s.plainArgs()
		if prov == "openai" && s.r.IntN(3) == 0 {
			args = string(appendJSON(nil, args))
		}
	}
	s.pending = append(s.pending, c)
	return object{
		{"tool_name", c.tool},
		{"args", args},
		{"tool_call_id", c.id},
		{"tool_kind", toolKind},
		{"id", nil},
		{"provider_name", nil},
		{"provider_details", nil},
		{"part_kind", "tool-call"},
	}
}

// plainArgs are a call's arguments: each key once, as a model's JSON
// object holds them (a key drawn again is dropped, after the same draws,
// so the stream of the rest of the history is unchanged).
func (s *sim) plainArgs() object {
	args := object{}
	add := func(m kv) {
		for _, have := range args {
			if have.k == m.k {
				return
			}
		}
		args = append(args, m)
	}
	for i, n := 0, s.r.IntN(5); i < n; i++ {
		switch s.r.IntN(5) {
		case 0:
			add(kv{nouns[s.r.IntN(len(nouns))] + "_id", 1000 + s.r.IntN(90000)})
		case 1:
			add(kv{"query", sentence(s.r, 2+s.r.IntN(6))})
		case 2:
			add(kv{"include_" + nouns[s.r.IntN(len(nouns))], s.r.IntN(2) == 0})
		case 3:
			add(kv{"limit", 10 * (1 + s.r.IntN(10))})
		default:
			add(kv{"note", prose(s.r, 20+s.r.IntN(100))})
		}
	}
	return args
}

func (s *sim) toolReturn(name, id string, content any, toolKind any, outcome string, metadata any) object {
	return object{
		{"tool_name", name},
		{"content", content},
		{"tool_call_id", id},
		{"tool_kind", toolKind},
		{"metadata", metadata},
		{"timestamp", s.tick()},
		{"outcome", outcome},
		{"part_kind", "tool-return"},
	}
}

func (s *sim) delta(names []string, callID any) object {
	list := make([]any, len(names))
	for i, n := range names {
		list[i] = n
		s.discovered[n] = true
	}
	if s.chance(0.03) {
		return object{{"part_kind", "tool-availability-delta"}, {"added", list}} // legacy input alias
	}
	return object{{"tools_added", list}, {"tool_call_id", callID}, {"part_kind", "tool-availability-delta"}}
}

// backfill names the loaded capabilities' tools not yet discovered (W22).
func (s *sim) backfill() []string {
	var out []string
	for _, c := range s.m.deferred {
		if !s.loaded[c] {
			continue
		}
		for _, n := range s.m.capTools[c] {
			if !s.discovered[n] {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// answerRequest answers the calls of the previous response.
func (s *sim) answerRequest() object {
	var parts []any
	calls := s.pending
	s.pending = nil
	for _, c := range calls {
		if s.noise() {
			continue // a dangling call: its return was lost
		}
		id := c.id
		if s.noise() {
			id = s.newCallID() // an orphan return
		}
		switch c.kind {
		case callSearch:
			names := s.corpusPick(1 + s.r.IntN(3))
			if s.r.IntN(5) == 0 {
				// Legacy form: untyped, the names in metadata (D1 item 3).
				list := make([]any, len(names))
				for i, n := range names {
					list[i] = n
				}
				var md any = object{{"discovered_tools", list}}
				if s.noise() {
					md = object{{"discovered_tools", "not a list"}}
				}
				parts = append(parts, s.toolReturn("search_tools", id, fmt.Sprintf("Found %d tools", len(names)), nil, "success", md))
			} else {
				parts = append(parts, s.toolReturn("search_tools", id, s.matches(names), "tool-search", "success", nil))
			}
			for _, n := range names {
				s.discovered[n] = true
			}
		case callLoad:
			tools, known := s.m.capTools[c.capID]
			if c.capID == "" || !known && !slices.Contains(s.m.deferred, c.capID) {
				// The framework writes failed loads untyped.
				msg := fmt.Sprintf("Unknown capability id %q. Available capabilities: %s", c.capID, strings.Join(s.m.deferred, ", "))
				parts = append(parts, s.toolReturn("load_capability", id, msg, nil, "failed", nil))
				continue
			}
			var content any = object{}
			if s.r.IntN(3) > 0 {
				content = object{{"instructions", prose(s.r, 100+s.r.IntN(400))}}
			}
			outcome := "success"
			if s.noise() {
				outcome = "failed" // typed and failed: still a load (L3)
			}
			parts = append(parts, s.toolReturn("load_capability", id, content, "capability-load", outcome, nil))
			s.loaded[c.capID] = true
			if len(tools) > 0 && s.r.IntN(10) > 0 {
				parts = append(parts, s.delta(tools, id))
			}
		case callUntypedLoad, callUntypedSearch:
			parts = append(parts, s.toolReturn(c.tool, id, object{{"result", prose(s.r, 40)}}, nil, "success", nil))
		default:
			switch {
			case c.refused && c.unknown:
				parts = append(parts, s.retry(c, fmt.Sprintf("Unknown tool name: %q. Available tools: %s", c.tool, strings.Join(s.available(), ", "))))
			case c.refused:
				parts = append(parts, s.retry(c, fmt.Sprintf("Tool %q is not available yet. Search for it with `search_tools` or load its capability first, then call it again.", c.tool)))
			case s.r.IntN(25) == 0:
				parts = append(parts, s.toolReturn(c.tool, id, "Error: upstream service returned 503 Service Unavailable", nil, "failed", nil))
			default:
				parts = append(parts, s.toolReturn(c.tool, id, s.returnContent(), nil, "success", nil))
				if s.chance(0.08) {
					// ToolReturn.tools: the tool reveals others (W20).
					parts = append(parts, s.delta(s.corpusPick(1+s.r.IntN(2)), id))
				}
			}
		}
	}
	if names := s.backfill(); len(names) > 0 && s.r.IntN(2) == 0 {
		parts = append(parts, s.delta(names, nil))
	}
	if s.noise() {
		parts = append(parts, object{{"tools_added", []any{}}, {"tool_call_id", nil}, {"part_kind", "tool-availability-delta"}})
	}
	if len(parts) == 0 {
		parts = append(parts, s.userPrompt())
	}
	return s.request(parts)
}

func (s *sim) retry(c pendingCall, msg string) object {
	return object{{"content", msg}, {"tool_name", c.tool}, {"tool_call_id", c.id}, {"timestamp", s.tick()}, {"part_kind", "retry-prompt"}}
}

// returnContent is a JSON object of a few hundred bytes, as a tool returns.
func (s *sim) returnContent() object {
	items := make([]any, 0, 3)
	for i, n := 0, 1+s.r.IntN(3); i < n; i++ {
		items = append(items, object{
			{"id", fmt.Sprintf("%s_%05d", nouns[s.r.IntN(len(nouns))], s.r.IntN(100000))},
			{"status", []string{"open", "closed", "pending", "failed", "active"}[s.r.IntN(5)]},
			{"amount", float64(s.r.IntN(1000000)) / 100},
			{"updated_at", s.now.Add(-time.Duration(s.r.IntN(1_000_000)) * time.Second).Format(time.RFC3339)},
			{"summary", sentence(s.r, 6+s.r.IntN(14))},
		})
	}
	return object{
		{"ok", true},
		{"count", len(items)},
		{"items", items},
		{"next_cursor", nullable(hexOrEmpty(s.r))},
	}
}

// --- text -------------------------------------------------------------------

var words = strings.Fields(`the a an of to and in for on with by from as is are was be this that it
order invoice customer account refund payment shipment ticket report policy team week month status
update request response tool result error retry available loaded search capability summary details
check confirm review approve schedule export import sync analyse total amount balance due date
please could would should will can may need want see find show list compare explain latest
previous next first last new open closed pending urgent quarterly annual daily weekly overdue
café naïve résumé — → ✓ €`)

// sentence returns n words, capitalised, with a final period.
func sentence(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range max(n, 1) {
		w := words[r.IntN(len(words))]
		if i == 0 {
			if c := w[0]; 'a' <= c && c <= 'z' {
				w = string(c-'a'+'A') + w[1:]
			}
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	b.WriteByte('.')
	return b.String()
}

// prose returns about size bytes of text with the things model output
// holds: paragraphs, quotes, inline code, lists and non-ASCII characters.
func prose(r *rand.Rand, size int) string {
	var b strings.Builder
	for b.Len() < size {
		switch r.IntN(12) {
		case 0:
			b.WriteString("\n\n")
		case 1:
			b.WriteString("\n- ")
		case 2:
			fmt.Fprintf(&b, "%q ", sentence(r, 2+r.IntN(4)))
		case 3:
			fmt.Fprintf(&b, "`%s_%s` ", verbs[r.IntN(len(verbs))], nouns[r.IntN(len(nouns))])
		case 4:
			fmt.Fprintf(&b, "%d.%02d ", r.IntN(10000), r.IntN(100))
		default:
			b.WriteString(sentence(r, 4+r.IntN(12)))
			b.WriteByte(' ')
		}
	}
	return strings.TrimSpace(b.String())
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func base62(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[r.IntN(62)]
	}
	return string(b)
}

func hexString(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[r.IntN(16)]
	}
	return strings.ToLower(string(b))
}

func hexOrEmpty(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return ""
	}
	return hexString(r, 16)
}

// nullable maps "" to JSON null.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// --- JSON -------------------------------------------------------------------

// kv is one member of an object; object keeps members in order, as the
// reference serializer writes them.
type kv struct {
	k string
	v any
}

type object []kv

// appendJSON writes v compactly: object, []any, string, bool, int, int64,
// float64 or nil.
func appendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case object:
		b = append(b, '{')
		for i, m := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m.k)
			b = append(b, ':')
			b = appendJSON(b, m.v)
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, x)
		}
		return append(b, ']')
	case string:
		return appendString(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.AppendFloat(b, v, 'f', 1, 64) // Python writes 12.0
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	panic(fmt.Sprintf("gen: cannot encode %T", v))
}

// appendString quotes s as pydantic's serializer does: UTF-8 kept as is,
// quotes, backslashes and control characters escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(b, '"')
}
