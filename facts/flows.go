package facts

import (
	"slices"
	"sort"
	"strings"

	"github.com/policycheck/policycheck/facts/internal/jsonvalue"
)

// Flows: which argument values of a dispatched call came from an earlier
// tool return or prompt (input.call.flows, docs/flows.md). The sources
// are the tool-return, builtin-tool-return, user-prompt and system-prompt
// parts, and the retry-prompt parts that name a tool (isFlowSource);
// "return" below is any of them. With
// Options.FlowTokens the strings' tokens are indexed too (flowtokens.go):
// those compared as they are searched like the strings, window by
// window, the identifiers looked up by their normalised form.
//
// The returns' strings are the unit: a string leaf of a call's arguments
// flows from a return when it equals ("exact") or contains ("contains")
// a string of that return's content of at least the minimum length
// (Options.FlowMinLength). A return's strings are every JSON string of
// its content (object keys included) and, recursively, the strings of a
// string that is itself JSON-encoded (an object or array, up to four
// levels). A number leaf of the arguments flows from a return holding an
// equal non-trivial number: one whose shortest decimal form has at least
// five significant digits (12345, 4999.99 and 0.031415 are; 2024, 10000,
// 250.5, 0.5 and 1e21 are not). Numbers are equal as 64-bit floats; the
// flow is exact when both are their float's shortest form, else it is
// contained (FlowContains). The walks of a return's bytes and of a
// call's arguments are package jsonvalue's (facts/internal/jsonvalue).
//
// Search: the index keeps each distinct return string once, with its
// sources, under its first FlowMinLength bytes. A leaf of n bytes is
// matched by looking each of its n-FlowMinLength+1 windows up in that
// map and comparing the (few) strings found there with the leaf from
// that offset on: linear in the leaf for the usual case, independent of
// the number of strings indexed. Many indexed strings sharing one prefix
// (URLs of one site, say) are each compared: that is the worst case,
// proportional to the leaf times the strings under one prefix, and it is
// bounded per call and per response (FlowCallCompareBudget,
// FlowResponseCompareBudget), and so are the flows found, which cost no
// comparison when they match exactly (FlowCallMaxFlows,
// FlowResponseMaxFlows): past a bound the flows are incomplete
// (Facts.FlowIndexTruncated).
//
// The Tracker indexes every return as it arrives: a later call may
// match any of them. A one-shot derivation (Derive, Flows) knows the
// dispatched calls' arguments first, and indexes only the returns whose
// content may hold a match of them (flowfilter.go: a necessary
// condition read from the content's bytes, decoded once); a return it
// skips counts against the cap by an upper bound of what it would have
// added, and a derivation that does not end complete that way is done
// again over every return. The flows and the truncation are the
// Tracker's in every case.

// Defaults of the flow options.
const (
	// DefaultFlowMinLength is the shortest return string, in bytes, that
	// an argument is matched against.
	DefaultFlowMinLength = 8
	// DefaultFlowIndexCap bounds the bytes of return strings one history
	// indexes (every occurrence counted, numbers by their shortest
	// decimal form): past it the index stops growing and
	// Facts.FlowIndexTruncated says so. A one-shot derivation counts a
	// return it does not index by an upper bound (flowfilter.go), and
	// indexes every return when that reaches the cap.
	DefaultFlowIndexCap = 8 << 20
	// FlowCallCompareBudget bounds the matching of one call's arguments:
	// the bytes of indexed strings compared with its string leaves, each
	// string found under a window's prefix counting its length. Past it
	// the call's matching stops (the flows found so far are kept) and
	// Facts.FlowIndexTruncated is true: the flows are incomplete.
	FlowCallCompareBudget = 16 << 20
	// FlowResponseCompareBudget bounds the same over all the calls of the
	// response being dispatched.
	FlowResponseCompareBudget = 64 << 20
	// FlowCallMaxFlows bounds the flows of one call: a value a hostile
	// history quotes in many returns, sent in many arguments, is a flow
	// per argument and return, each costing its matching, its place in
	// the policy's input and the rules reading it, at no cost in
	// comparisons (an exact match compares nothing). Past it the call's
	// matching stops (the flows found so far are kept) and
	// Facts.FlowIndexTruncated is true, as past the comparison budget.
	FlowCallMaxFlows = 4096
	// FlowResponseMaxFlows bounds the same over all the calls of the
	// response being dispatched.
	FlowResponseMaxFlows = 4 * FlowCallMaxFlows
)

// FlowMatch says how an argument value matched a return's string.
type FlowMatch uint8

// Flow matches.
const (
	// FlowExact: the argument equals a string (or number) of the return.
	FlowExact FlowMatch = iota + 1
	// FlowContains: the argument contains a string of the return, or is
	// a number equal to one of the return's as a 64-bit float when
	// either is not its float's shortest form (1234567890123456789 and
	// 1234567890123456800 are one float, not one number).
	FlowContains
	// FlowToken: the argument holds a token of a string of the source
	// (Options.FlowTokens; Flow.Token names its class), and neither
	// equals nor contains a whole string of it.
	FlowToken
)

// String returns the match's name in the input document.
func (m FlowMatch) String() string {
	switch m {
	case FlowContains:
		return "contains"
	case FlowToken:
		return "token"
	}
	return "exact"
}

// FlowSource is the part a flowing value came from: a tool return, a
// builtin tool return, a user prompt or a system prompt.
type FlowSource struct {
	// Kind is the source part's kind: ToolReturn, BuiltinToolReturn,
	// UserPrompt, SystemPrompt, or RetryPrompt (one that names a tool:
	// its ModelRetry message or validation error was put before the
	// model as a return is).
	Kind PartKind
	// ToolCallID is nil when the part has none (always for a prompt).
	ToolCallID *string
	// Tool is the return's tool name; "" for a prompt.
	Tool string
	// Labels are the tool's effective registry labels (none for a tool
	// the registry does not have, nor for a prompt). Shared: callers
	// must not modify them.
	Labels []string
	// At locates the return part in the whole history.
	At Position
	// Beside, for a prompt part, names the tools whose tool-return or
	// retry-prompt parts share its request message, in message order:
	// pydantic-ai puts what a tool returns beside its return value (a
	// ToolReturn's content, the files a tool returns) in a user-prompt
	// part of that request, so such a part is not the user's word alone
	// and carries those tools' labels too. Nil otherwise.
	Beside []string
}

// besideOf is FlowSource.Beside for the prompt parts of m.
func besideOf(m *Message) []string {
	var out []string
	for i := range m.Parts {
		p := &m.Parts[i]
		if (p.Kind == ToolReturn || p.Kind == RetryPrompt) && p.ToolName != "" && !slices.Contains(out, p.ToolName) {
			out = append(out, p.ToolName)
		}
	}
	return out
}

// Flow is one argument value of a call that came from a return.
type Flow struct {
	// Path is the JSON pointer of the value in the call's arguments, as
	// the policies read them (ArgsValue).
	Path  string
	Match FlowMatch
	// Token is the class of the token the value was found by when Match
	// is FlowToken, else 0.
	Token TokenClass
	// Whole: the value as a whole equals the source's string or token:
	// true for FlowExact, false for FlowContains, and for FlowToken true
	// when the whole value is one token of class Token (for an
	// identifier, one identifier from its first byte to its last,
	// equal once normalised; for the other classes, equal as is) rather
	// than holds it among other text.
	Whole  bool
	Source FlowSource
	// EchoOfTheAgent: the source is a tool return that cannot vouch for
	// the value, because the agent sent it the value (Echoes: the value
	// is in the arguments of a tool call before the return, of any tool
	// and any tool_call_id: a lookup echoing the IBAN it was asked
	// about, a note the model wrote and a trusted tool reads back, a
	// twin call's, the model choosing the ids), or because the history
	// holds no call it answered (no tool_call_id, or none before it with
	// its id and tool). What the agent sent is looked at only where a
	// trusted return would vouch for the value (the flow is Trusting);
	// elsewhere it is false but for a return that answers no call. A
	// prompt part beside tool returns (Beside: it may hold what they
	// returned) is judged as a return is, though it answers no call;
	// other prompts, and provider-side returns, are always false.
	EchoOfTheAgent bool
}

// Trusting reports whether the flow makes its value the source's when
// the source is trusted (input.call.args_integrity): an exact match, or
// a whole token of an identifier class (an email, URL, IBAN or digit
// run as a whole). A whole line, pair value or run does not: free text.
func (f Flow) Trusting() bool {
	switch f.Match {
	case FlowExact:
		return true
	case FlowToken:
		return f.Whole && f.Token < TokenPairValue
	}
	return false
}

// Echoes reports whether the value v (a string, or a number as
// ArgsValue reads one: a json.Number) is in the raw arguments args of a
// call. A string is when it is equal to, or inside, one of their
// strings, numbers or object keys, both with their letters and digits
// only, lower-cased (an IBAN the model sent spaced, hyphenated or
// lower-cased is still its own). A number is when they hold a number of
// equal value however written (73401659, 7.3401659e7), or a string
// holding it as a plain decimal ("account 73401659"). Nothing is echoed
// when v is neither, or a string empty once folded.
func Echoes(args []byte, v any) bool {
	switch x := v.(type) {
	case string:
		return jsonvalue.Echoes(args, x)
	case interface{ String() string }: // json.Number
		return jsonvalue.EchoesNumber(args, x.String())
	}
	return false
}

// sourceCall is what a tool-return source may echo, as the index saw it
// (nil when the history holds no call of its tool with its id before
// it): the calls the agent made before it.
type sourceCall struct {
	log    *sentArgs
	before int // the calls before the return: log.args[:before]
}

// echoes reports whether a call before the return sent the value leaf
// (a string, or a number's key when num; Flow.EchoOfTheAgent), the bytes
// searched spent from b; past the budget it answers true (the return
// cannot vouch for what was not checked) and b marks the flows
// incomplete.
func (c *sourceCall) echoes(leaf string, num bool, b *flowBudget) bool {
	w := jsonvalue.WantText(leaf)
	if num {
		w = jsonvalue.WantNumber(leaf)
	}
	first, ok := c.log.first(w, b)
	return !ok || first < c.before
}

// sentArgs is what the calls the index has seen sent, for the returns
// after them (Flow.EchoOfTheAgent): each call's arguments in history
// order, read (jsonvalue.EchoOf) on the first flow that asks, and the
// tools called with each tool_call_id.
type sentArgs struct {
	args [][]byte
	echo []*jsonvalue.Echo // parallel to args, nil until read
	// sums[i] is the Size of the echoes of the first i calls: what a
	// look-up comparing them spends (read in order, so len(sums)-1 calls
	// are read).
	sums []int
	ids  map[string][]string
	// The last value looked up (first): the index of the first call
	// holding it among the first n, n when none.
	want     jsonvalue.EchoWant
	ok       bool
	n, found int
	// grams, when not nil (a Tracker's index), holds for each 4-byte
	// window of the calls' texts and for each number key the first call
	// holding it, for the calls read (indexed of them): a look-up starts
	// at the first call that may hold all the windows of what it looks
	// for, so that a step's look-up does not read the whole session
	// again. It spends the budget as the look-up from the first call
	// does (spendThrough), so a Tracker and a derivation agree.
	grams   map[uint32]int32
	numKeys map[string]int32
	indexed int
}

// echoGram is the length of the windows sentArgs.grams holds.
const echoGram = 4

// note keeps the tool calls of m.
func (l *sentArgs) note(m *Message) {
	if m.Kind != Response {
		return
	}
	for p := range m.Parts {
		if c := &m.Parts[p]; c.Kind == ToolCall {
			l.args = append(l.args, c.Args)
			l.echo = append(l.echo, nil)
			if c.HasToolCallID {
				if l.ids == nil {
					l.ids = map[string][]string{}
				}
				l.ids[c.ToolCallID] = append(l.ids[c.ToolCallID], c.ToolName)
			}
		}
	}
}

// sourceCall is the sourceCall of a return of tool with tool_call_id
// id, indexed now: nil when no call of tool with id came before it.
func (l *sentArgs) sourceCall(tool, id string) *sourceCall {
	if !slices.Contains(l.ids[id], tool) {
		return nil
	}
	return &sourceCall{log: l, before: len(l.args)}
}

// first returns the index of the first call whose arguments hold w
// (jsonvalue.Echo.Has; len(l.args) when none), spending from b the
// bytes a comparison with each call up to it compares; false past the
// budget. What it reads is bounded by the budget too: a look-up stops
// at the first call a comparison from the first call would pass the
// budget at, since it fails wherever it finds w from there.
func (l *sentArgs) first(w jsonvalue.EchoWant, b *flowBudget) (int, bool) {
	return l.firstOf(w, len(l.args), b)
}

// firstOf is first among the first n calls (n when none holds w).
func (l *sentArgs) firstOf(w jsonvalue.EchoWant, n int, b *flowBudget) (int, bool) {
	if l.ok && l.want == w && l.n == n {
		return l.found, true
	}
	start := 0
	if l.grams != nil {
		l.indexGrams()
		start = l.lowerBound(w)
	}
	found := n
	for i := start; i < n; i++ {
		e := l.echoAt(i)
		if l.sums[i+1] > b.call {
			break
		}
		if e.Has(w) {
			found = i
			break
		}
	}
	if !l.spendThrough(min(found, n-1), b) {
		l.ok = false
		return 0, false
	}
	l.want, l.n, l.found, l.ok = w, n, found, true
	return found, true
}

// echoAt is call i's echo, read with every call before it.
func (l *sentArgs) echoAt(i int) *jsonvalue.Echo {
	if len(l.sums) == 0 {
		l.sums = []int{0}
	}
	for k := len(l.sums) - 1; k <= i; k++ {
		l.echo[k] = jsonvalue.EchoOf(l.args[k])
		l.sums = append(l.sums, l.sums[k]+l.echo[k].Size())
	}
	return l.echo[i]
}

// spendThrough spends from b what comparing with calls 0 to t, one by
// one, spends: false (b marked exceeded) at the first call past the
// budget.
func (l *sentArgs) spendThrough(t int, b *flowBudget) bool {
	if t < 0 {
		return true
	}
	// The first of the calls up to t whose comparison passes the budget.
	// first has read every call up to t, or stopped at that one: it is
	// among those read, and no call past it is read.
	read := max(len(l.sums)-1, 0)
	i := sort.Search(min(read, t+1), func(i int) bool { return l.sums[i+1] > b.call })
	if i == read && i <= t {
		l.echoAt(t)
		i = sort.Search(t+1, func(i int) bool { return l.sums[i+1] > b.call })
	}
	if i > t {
		return b.spend(l.sums[t+1])
	}
	b.spend(l.sums[i])
	return b.spend(l.echo[i].Size())
}

// indexGrams adds the windows and number keys of the calls not yet
// indexed to grams.
func (l *sentArgs) indexGrams() {
	for ; l.indexed < len(l.args); l.indexed++ {
		e, i := l.echoAt(l.indexed), int32(l.indexed)
		for _, t := range e.Texts() {
			for j := 0; j+echoGram <= len(t); j++ {
				g := gram4(t, j)
				if _, ok := l.grams[g]; !ok {
					l.grams[g] = i
				}
			}
		}
		for _, k := range e.Numbers() {
			if _, ok := l.numKeys[k]; !ok {
				l.numKeys[k] = i
			}
		}
	}
}

// lowerBound is the first call that may hold w (by grams), all calls
// indexed: a call holding a text holds each of its windows, and a number
// by its key or its plain decimal text (jsonvalue.Echo.Has).
// len(l.args) when none may.
func (l *sentArgs) lowerBound(w jsonvalue.EchoWant) int {
	lb := l.textBound(w.Text())
	if key, num := w.Key(); num {
		if i, ok := l.numKeys[key]; ok {
			lb = min(lb, int(i))
		}
	}
	return lb
}

// gram4 is the window of s at j.
func gram4(s string, j int) uint32 {
	return uint32(s[j]) | uint32(s[j+1])<<8 | uint32(s[j+2])<<16 | uint32(s[j+3])<<24
}

// textBound is lowerBound for a text in EchoForm.
func (l *sentArgs) textBound(w string) int {
	if w == "" {
		return len(l.args) // in no text (jsonvalue.Echo.HasText)
	}
	lb := 0
	for j := 0; j+echoGram <= len(w); j++ {
		i, ok := l.grams[gram4(w, j)]
		if !ok {
			return len(l.args)
		}
		lb = max(lb, int(i))
	}
	return lb
}

func (o Options) flowMinLength() int {
	if o.FlowMinLength > 0 {
		return o.FlowMinLength
	}
	return DefaultFlowMinLength
}

func (o Options) flowIndexCap() int {
	if o.FlowIndexCap > 0 {
		return o.FlowIndexCap
	}
	return DefaultFlowIndexCap
}

// ArgsValue returns a call's raw arguments as the policies read them
// (ReadArgs's Value): the JSON value (numbers as encoding/json's
// json.Number), with a
// string that holds a JSON object read as that object; nil when absent,
// null, or not readable exactly one way (Args.Problem).
func ArgsValue(raw []byte) any { return ReadArgs(raw).Value }

// argsValues is the ArgsValue of each call's arguments: a derivation
// reads them once, for its filter and its matching.
func argsValues(calls []Call) []any {
	vals := make([]any, len(calls))
	for i := range calls {
		vals[i] = ArgsValue(calls[i].Args)
	}
	return vals
}

// flowString is one distinct indexed string and its sources (indexes
// into flowIndex.sources, in history order, without repeats).
type flowString struct {
	s    string
	srcs []int32
}

// flowToken is one distinct token and its sources, each with the first
// class (TokenClass order) it had there.
type flowToken struct {
	s    string
	srcs []int32
	cls  []TokenClass
}

func (t *flowToken) add(si int32, c TokenClass) {
	if n := len(t.srcs); n > 0 && t.srcs[n-1] == si {
		t.cls[n-1] = min(t.cls[n-1], c)
		return
	}
	t.srcs = append(t.srcs, si)
	t.cls = append(t.cls, c)
}

// flowIndex holds the strings and numbers of a history's sources.
type flowIndex struct {
	minLen, cap int
	// tokens: the strings' tokens are indexed too (Options.FlowTokens):
	// those compared as they are in toks and tokByPrefix, the
	// identifiers by their normalised form in idents.
	tokens      bool
	toks        map[string]*flowToken
	tokByPrefix map[string][]*flowToken
	idents      map[string]*flowToken
	// cut and cutText are the scratch of cutTokens; tokBlock holds the
	// flowTokens last allocated.
	cut       []cutToken
	cutText   []byte
	tokBlock  []flowToken
	used      int
	truncated bool
	sources   []FlowSource
	// srcCalls, parallel to sources, is what the index knew of each
	// tool-return source's calls when it was indexed; calls holds the
	// calls seen, in history order.
	srcCalls []*sourceCall
	calls    sentArgs
	strs     map[string]*flowString
	byPrefix map[string][]*flowString
	nums     map[string][]int32
	// nearNums holds the inexact numbers (jsonvalue.Leaf.Inexact) by
	// key, apart from nums: their flows are never exact.
	nearNums map[string][]int32
	// walk is the scratch of addPart, made on first use.
	walk *jsonvalue.Walker
	// block holds the flowStrings last allocated (newString).
	block []flowString
}

func newFlowIndex(o Options) *flowIndex {
	x := &flowIndex{minLen: o.flowMinLength(), cap: o.flowIndexCap(), tokens: o.FlowTokens,
		strs: map[string]*flowString{}, byPrefix: map[string][]*flowString{}, nums: map[string][]int32{}, nearNums: map[string][]int32{}}
	x.initTokens()
	return x
}

func (x *flowIndex) initTokens() {
	if x.tokens {
		x.toks, x.tokByPrefix, x.idents = map[string]*flowToken{}, map[string][]*flowToken{}, map[string]*flowToken{}
	}
}

// overlay returns an empty index with what is left of x's budget: the
// returns of the response being dispatched, indexed without changing x.
func (x *flowIndex) overlay() *flowIndex {
	o := &flowIndex{minLen: x.minLen, cap: x.cap - x.used, truncated: x.truncated, tokens: x.tokens,
		strs: map[string]*flowString{}, byPrefix: map[string][]*flowString{}, nums: map[string][]int32{}, nearNums: map[string][]int32{}}
	o.initTokens()
	return o
}

// isFlowSource reports whether a part's content is indexed: a return,
// a prompt, or a retry prompt that names a tool (what the tool's
// ModelRetry said, or its arguments' validation error; one that names
// no tool is the framework's about the model's output).
func isFlowSource(p *Part) bool {
	switch p.Kind {
	case ToolReturn, BuiltinToolReturn, UserPrompt, SystemPrompt:
		return true
	case RetryPrompt:
		return p.ToolName != ""
	}
	return false
}

// addPart indexes the content of source part p at pos.
func (x *flowIndex) addPart(p *Part, pos Position, reg *Registry, beside []string) {
	if x.truncated || len(p.Content) == 0 {
		return
	}
	if x.walk == nil {
		x.walk = jsonvalue.NewWalker(x.minLen)
	}
	w := x.walk
	if !w.Walk(p.Content) {
		return
	}
	src := FlowSource{Kind: p.Kind, Tool: p.ToolName, Labels: toolLabels(reg, p.ToolName), At: pos}
	var call *sourceCall
	if p.Kind == UserPrompt || p.Kind == SystemPrompt {
		src.Tool, src.Labels, src.Beside = "", []string{}, beside
		if len(beside) > 0 {
			// It may hold what those tools returned: judged as a return
			// is, though it answers no call.
			call = &sourceCall{log: &x.calls, before: len(x.calls.args)}
		}
	} else if p.HasToolCallID {
		id := p.ToolCallID
		src.ToolCallID = &id
	}
	if p.Kind == ToolReturn && p.HasToolCallID {
		call = x.calls.sourceCall(p.ToolName, p.ToolCallID)
	}
	x.sources = append(x.sources, src)
	x.srcCalls = append(x.srcCalls, call)
	si := int32(len(x.sources) - 1)
	leaves := w.Leaves()
	for i := range leaves {
		l := &leaves[i]
		b := w.Bytes(l)
		n := l.Len()
		if x.tokens && !l.Num() {
			n += x.cutTokens(b)
		}
		if x.used+n > x.cap {
			x.truncated = true
			return
		}
		x.used += n
		if l.Num() {
			nums := x.nums
			if l.Inexact() {
				nums = x.nearNums
			}
			if ns, ok := nums[string(b)]; !ok || ns[len(ns)-1] != si {
				nums[string(b)] = append(ns, si)
			}
			continue
		}
		fs := x.strs[string(b)]
		if fs == nil {
			fs = x.newString(string(b))
		}
		if len(fs.srcs) == 0 || fs.srcs[len(fs.srcs)-1] != si {
			fs.srcs = append(fs.srcs, si)
		}
		if x.tokens {
			x.addTokens(si)
		}
	}
}

// cutToken is one token of the string being indexed: its class and its
// bytes, text[s:e] of the index's scratch.
type cutToken struct {
	cls  TokenClass
	s, e int
}

// cutTokens cuts the string b into its tokens (held in x's scratch until
// addTokens) and returns their bytes, every one counted: what indexing
// them adds to the cap's count.
func (x *flowIndex) cutTokens(b []byte) int {
	x.cut, x.cutText = x.cut[:0], x.cutText[:0]
	n := 0
	keep := func(c TokenClass, t string) {
		x.cut = append(x.cut, cutToken{cls: c, s: len(x.cutText), e: len(x.cutText) + len(t)})
		x.cutText = append(x.cutText, t...)
		n += len(t)
	}
	s := string(b)
	textTokens(s, x.minLen, keep)
	identTokens(s, x.minLen, keep)
	return n
}

// addTokens indexes the tokens cutTokens cut, of source si.
func (x *flowIndex) addTokens(si int32) {
	for _, ct := range x.cut {
		t := x.cutText[ct.s:ct.e]
		m := x.toks
		if ct.cls < TokenPairValue {
			m = x.idents
		}
		ft := m[string(t)]
		if ft == nil {
			if len(x.tokBlock) == cap(x.tokBlock) {
				x.tokBlock = make([]flowToken, 0, 64)
			}
			x.tokBlock = append(x.tokBlock, flowToken{s: string(t)})
			ft = &x.tokBlock[len(x.tokBlock)-1]
			m[ft.s] = ft
			if ct.cls >= TokenPairValue {
				pre := ft.s[:x.minLen]
				x.tokByPrefix[pre] = append(x.tokByPrefix[pre], ft)
			}
		}
		ft.add(si, ct.cls)
	}
}

// newString adds s to the index, without sources. The flowStrings are
// allocated in blocks.
func (x *flowIndex) newString(s string) *flowString {
	if len(x.block) == cap(x.block) {
		x.block = make([]flowString, 0, 64)
	}
	x.block = append(x.block, flowString{s: s})
	fs := &x.block[len(x.block)-1]
	x.strs[s] = fs
	pre := s[:x.minLen]
	x.byPrefix[pre] = append(x.byPrefix[pre], fs)
	return fs
}

func toolLabels(reg *Registry, tool string) []string {
	if reg != nil {
		if t, ok := reg.Tool(tool); ok {
			return t.Labels
		}
	}
	return []string{}
}

// flowHit is one (leaf, source) pair found: how it matched (exact,
// contains, or by a token of class tok, the first in TokenClass order,
// whole when the leaf is one such token as a whole).
type flowHit struct {
	exact, contains bool
	tok             TokenClass
	whole           bool
	call            *sourceCall // the source's call (a tool return's), nil for none
}

// flowBudget is what is left of the comparison budgets of a response
// and of the call being matched (FlowCallCompareBudget,
// FlowResponseCompareBudget), in bytes compared, and of their flows
// (FlowCallMaxFlows, FlowResponseMaxFlows).
type flowBudget struct {
	call, response int
	// flows and flowsResponse: the flows the call and the response may
	// still have (a budget built without newFlowBudget has none, and
	// finds none: SentValues compares, it writes no flow).
	flows, flowsResponse int
	// exceeded: some call's matching stopped at a budget.
	exceeded bool
}

func newFlowBudget() *flowBudget {
	return &flowBudget{response: FlowResponseCompareBudget, flowsResponse: FlowResponseMaxFlows}
}

// startCall gives the next call its budget.
func (b *flowBudget) startCall() {
	b.call = min(FlowCallCompareBudget, b.response)
	b.flows = min(FlowCallMaxFlows, b.flowsResponse)
}

// flow takes one flow from the budgets, or reports false (and marks the
// flows incomplete) when none is left.
func (b *flowBudget) flow() bool {
	if b.flows <= 0 {
		b.exceeded = true
		return false
	}
	b.flows--
	b.flowsResponse--
	return true
}

// full reports whether the call may have no more flows.
func (b *flowBudget) full() bool { return b.flows <= 0 }

// spend takes n bytes of comparison from the budgets, or reports false
// (and marks the flows incomplete) when that passes one of them.
func (b *flowBudget) spend(n int) bool {
	if n > b.call {
		b.call = 0
		b.exceeded = true
		return false
	}
	b.call -= n
	b.response -= n
	return true
}

// matchString records in hits the sources of x's strings that leaf
// equals or contains, within budget b.
func (x *flowIndex) matchString(leaf string, b *flowBudget, hits map[Position]*flowHit, srcOf map[Position]FlowSource) {
	if len(leaf) < x.minLen {
		return
	}
	if fs, ok := x.strs[leaf]; ok {
		x.note(fs.srcs, true, b, hits, srcOf)
	}
	for i := 0; i+x.minLen <= len(leaf); i++ {
		for _, fs := range x.byPrefix[leaf[i:i+x.minLen]] {
			if len(fs.s) >= len(leaf) {
				continue
			}
			if !b.spend(len(fs.s)) {
				return
			}
			if strings.HasPrefix(leaf[i:], fs.s) {
				x.note(fs.srcs, false, b, hits, srcOf)
			}
		}
	}
	if !x.tokens {
		return
	}
	for i := 0; i+x.minLen <= len(leaf); i++ {
		for _, ft := range x.tokByPrefix[leaf[i:i+x.minLen]] {
			if len(ft.s) > len(leaf)-i {
				continue
			}
			if !b.spend(len(ft.s)) {
				return
			}
			if strings.HasPrefix(leaf[i:], ft.s) {
				x.noteToken(ft, i == 0 && len(ft.s) == len(leaf), b, hits, srcOf)
			}
		}
	}
	identSpans(leaf, x.minLen, func(_ TokenClass, t string, i, e int) {
		if ft := x.idents[t]; ft != nil {
			x.noteToken(ft, i == 0 && e == len(leaf), b, hits, srcOf)
		}
	})
}

// noteToken records in hits the sources of token ft, each with its
// class; whole when the leaf is the token as a whole.
func (x *flowIndex) noteToken(ft *flowToken, whole bool, b *flowBudget, hits map[Position]*flowHit, srcOf map[Position]FlowSource) {
	for k, si := range ft.srcs {
		src := x.sources[si]
		h := hits[src.At]
		if h == nil {
			if !b.flow() {
				return
			}
			h = &flowHit{call: x.srcCalls[si]}
			hits[src.At] = h
			srcOf[src.At] = src
		}
		switch c := ft.cls[k]; {
		case h.tok == 0 || c < h.tok:
			h.tok, h.whole = c, whole
		case c == h.tok:
			h.whole = h.whole || whole
		}
	}
}

// An exact flow needs both numbers exact (jsonvalue.Leaf.Inexact): a
// number whose digits are not its key's may be another number than one
// of the same key, and flows from it as contained, which vouches for
// nothing (Flow.Trusting).
func (x *flowIndex) matchNumber(key string, inexact bool, b *flowBudget, hits map[Position]*flowHit, srcOf map[Position]FlowSource) {
	x.note(x.nums[key], !inexact, b, hits, srcOf)
	x.note(x.nearNums[key], false, b, hits, srcOf)
}

// note records in hits the sources srcs (indexes into x.sources), exact
// when the value equals the source's rather than contains it; a source
// not yet in hits takes a flow from b, and none is recorded once b has
// none left.
func (x *flowIndex) note(srcs []int32, exact bool, b *flowBudget, hits map[Position]*flowHit, srcOf map[Position]FlowSource) {
	for _, si := range srcs {
		src := x.sources[si]
		h := hits[src.At]
		if h == nil {
			if !b.flow() {
				return
			}
			h = &flowHit{call: x.srcCalls[si]}
			hits[src.At] = h
			srcOf[src.At] = src
		}
		h.exact = h.exact || exact
		h.contains = h.contains || !exact
	}
}

// callFlows returns the flows of a call's raw arguments from the returns
// the indexes hold: for each leaf in document order (an object's keys
// sorted, an array's elements in order), one Flow per return part it
// matched, those in history order. Never nil. It matches within the
// budget b gives the call: past it, what is found so far.
func callFlows(args any, b *flowBudget, idx ...*flowIndex) []Flow {
	b.startCall()
	out := []Flow{}
	hits := map[Position]*flowHit{}
	srcOf := map[Position]FlowSource{}
	jsonvalue.VisitArgs(args, func(path, leaf string, num, inexact bool) {
		if b.full() {
			// The call has all the flows it may have: nothing more is
			// looked up (the leaf is not visited, so that a hostile
			// argument list costs no more than its reading).
			b.exceeded = true
			return
		}
		for _, x := range idx {
			if num {
				x.matchNumber(leaf, inexact, b, hits, srcOf)
			} else {
				x.matchString(leaf, b, hits, srcOf)
			}
		}
		if len(hits) == 0 {
			return
		}
		at := make([]Position, 0, len(hits))
		for p := range hits {
			at = append(at, p)
		}
		slices.SortFunc(at, comparePositions)
		for _, p := range at {
			h := hits[p]
			f := Flow{Path: path, Match: FlowToken, Source: srcOf[p]}
			switch {
			case h.exact:
				f.Match, f.Whole = FlowExact, true
			case h.contains:
				f.Match = FlowContains
			default:
				f.Token, f.Whole = h.tok, h.whole
			}
			switch {
			case f.Source.Kind == ToolReturn:
				// What the agent sent is looked for only where the
				// return would vouch for the value.
				f.EchoOfTheAgent = h.call == nil || f.Trusting() && h.call.echoes(leaf, num, b)
			case len(f.Source.Beside) > 0:
				f.EchoOfTheAgent = f.Trusting() && h.call.echoes(leaf, num, b)
			}
			out = append(out, f)
		}
		clear(hits)
		clear(srcOf)
	})
	return out
}

// dispatchFlows fills the flows of the calls of R (message r) from base,
// the index of the history before R, and R's own return parts before
// each call, and reports whether the flows may be incomplete: the index
// dropped something, or the matching of a call stopped at a comparison
// budget. vals are the calls' arguments as ArgsValue reads them
// (argsValues), read here when nil.
func dispatchFlows(base *flowIndex, R *Message, r int, calls []Call, vals []any, reg *Registry) bool {
	if vals == nil {
		vals = argsValues(calls)
	}
	// What a look-up of the calls found is kept within a response only,
	// so that a Tracker's response spends the budget as a derivation's.
	base.calls.ok = false
	ov := base.overlay()
	b := newFlowBudget()
	c := 0
	for p := range R.Parts {
		part := &R.Parts[p]
		if isFlowSource(part) {
			ov.addPart(part, Position{r, p}, reg, nil) // a response holds no prompt
		}
		for c < len(calls) && calls[c].Part == p {
			calls[c].Flows = callFlows(vals[c], b, base, ov)
			c++
		}
	}
	return ov.truncated || b.exceeded
}

// indexFlows indexes the returns of message m at index idx.
func (x *flowIndex) fold(m *Message, idx int, reg *Registry) {
	x.noteCalls(m)
	beside := besideOf(m)
	for p := range m.Parts {
		if isFlowSource(&m.Parts[p]) {
			x.addPart(&m.Parts[p], Position{idx, p}, reg, beside)
		}
	}
}

// noteCalls keeps the arguments of m's tool calls for the returns after
// them (Flow.EchoOfTheAgent).
func (x *flowIndex) noteCalls(m *Message) { x.calls.note(m) }
