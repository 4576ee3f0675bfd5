package facts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// bruteFlows is the definition of flows (docs/flows.md), transcribed
// literally and independently of the index: every string and
// non-trivial number of every source part (tool and builtin tool
// returns, user and system prompts), in history order, and with tokens
// on every token of each string (bruteTokens), kept while their bytes fit
// the cap (a string with its tokens); for each string leaf of a call's
// arguments, every kept string of a source before the call that the leaf
// equals or contains, every token it contains or, for an identifier,
// holds normalised, and for each number leaf every equal kept number;
// whole when the leaf equals the string, equals the token (a text
// token), or is, from its first byte to its last, one identifier whose
// normalised form is the token.
func bruteFlows(h facts.History, reg *facts.Registry, minLen, limit int, tokens bool) ([][]facts.Flow, bool) {
	type occ struct {
		s     string
		num   bool
		near  bool // an inexact number (bruteNumber)
		cls   facts.TokenClass
		ident bool
		at    facts.Position
		src   facts.FlowSource
	}
	var occs []occ
	used, truncated := 0, false
	for m := range h {
		for p := range h[m].Parts {
			part := h[m].Parts[p]
			switch part.Kind {
			case facts.ToolReturn, facts.BuiltinToolReturn, facts.UserPrompt, facts.SystemPrompt:
			case facts.RetryPrompt:
				if part.ToolName == "" { // the framework's words about the output
					continue
				}
			default:
				continue
			}
			if len(part.Content) == 0 {
				continue
			}
			src := facts.FlowSource{Kind: part.Kind, Tool: part.ToolName, Labels: []string{}, At: facts.Position{Message: m, Part: p}}
			if part.Kind == facts.UserPrompt || part.Kind == facts.SystemPrompt {
				src.Tool = ""
				// The tools whose returns (or retry prompts) share the
				// prompt's request, each once, in message order.
				for _, q := range h[m].Parts {
					if (q.Kind == facts.ToolReturn || q.Kind == facts.RetryPrompt) && q.ToolName != "" && !slices.Contains(src.Beside, q.ToolName) {
						src.Beside = append(src.Beside, q.ToolName)
					}
				}
			} else {
				if t, ok := reg.Tool(part.ToolName); ok {
					src.Labels = t.Labels
				}
				if part.HasToolCallID {
					id := part.ToolCallID
					src.ToolCallID = &id
				}
			}
			var v any
			dec := json.NewDecoder(bytes.NewReader(part.Content))
			dec.UseNumber()
			if dec.Decode(&v) != nil {
				continue
			}
			for _, o := range bruteStrings(v, 0, minLen) {
				n := len(o.s)
				var toks []bruteToken
				if tokens && !o.num {
					toks = bruteTokens(o.s, minLen)
					for _, t := range toks {
						n += len(t.s)
					}
				}
				if truncated || used+n > limit {
					truncated = true
					break
				}
				used += n
				occs = append(occs, occ{s: o.s, num: o.num, near: o.near, at: src.At, src: src})
				for _, t := range toks {
					occs = append(occs, occ{s: t.s, cls: t.cls, ident: t.ident, at: src.At, src: src})
				}
			}
		}
	}
	r := len(h) - 1
	if r < 0 || h[r].Kind != facts.Response {
		return nil, truncated
	}
	type hit struct {
		m     facts.FlowMatch
		cls   facts.TokenClass
		whole bool
	}
	var out [][]facts.Flow
	for p, part := range h[r].Parts {
		if part.Kind != facts.ToolCall {
			continue
		}
		call := facts.Position{Message: r, Part: p}
		flows := []facts.Flow{}
		for _, leaf := range bruteLeaves(facts.ArgsValue(part.Args), "") {
			// idents: the leaf's identifiers, true when one is the whole leaf.
			idents := map[string]bool{}
			if !leaf.num && len(leaf.s) >= minLen {
				for _, t := range bruteTokens(leaf.s, minLen) {
					if t.ident {
						idents[t.s] = idents[t.s] || t.full
					}
				}
			}
			match := map[facts.Position]hit{}
			srcs := map[facts.Position]facts.FlowSource{}
			for _, o := range occs {
				if !o.at.Before(call) {
					continue
				}
				var h hit
				switch {
				case o.num != leaf.num:
				case o.num && leaf.s == o.s && (o.near || leaf.near):
					h.m = facts.FlowContains // equal floats, maybe not equal digits
				case o.cls == 0 && leaf.s == o.s:
					h = hit{m: facts.FlowExact, whole: true}
				case o.cls == 0 && !leaf.num && strings.Contains(leaf.s, o.s):
					h.m = facts.FlowContains
				case o.cls != 0 && !o.ident && strings.Contains(leaf.s, o.s):
					h = hit{facts.FlowToken, o.cls, leaf.s == o.s}
				case o.cls != 0 && o.ident:
					if full, ok := idents[o.s]; ok {
						h = hit{facts.FlowToken, o.cls, full}
					}
				}
				if h.m == 0 {
					continue
				}
				old, seen := match[o.at]
				switch {
				case !seen, h.m < old.m, h.m == old.m && h.cls < old.cls:
					match[o.at] = h
				case h.m == old.m && h.cls == old.cls && h.whole:
					old.whole = true
					match[o.at] = old
				}
				srcs[o.at] = o.src
			}
			var at []facts.Position
			for p := range match {
				at = append(at, p)
			}
			sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
			for _, p := range at {
				fl := facts.Flow{Path: leaf.path, Match: match[p].m, Token: match[p].cls, Whole: match[p].whole, Source: srcs[p]}
				if fl.Source.Kind == facts.ToolReturn || len(fl.Source.Beside) > 0 {
					fl.EchoOfTheAgent = bruteEcho(h, fl, leaf.s, leaf.num)
				}
				flows = append(flows, fl)
			}
		}
		out = append(out, flows)
	}
	return out, truncated
}

// bruteEcho: a tool-return source echoes the value when no call before
// it carries its id and tool (it answers none; a prompt beside tool
// returns answers none and needs none), or, for a flow that
// would make the value the source's (exact, or a whole identifier
// token), when the arguments of a call before it, of any tool and id,
// hold the value: a string when one of their strings, numbers or keys
// holds it, both with letters and digits only, lower-cased; a number
// (value is its key) when they hold a number of equal value, or a text
// holding it as a plain decimal.
func bruteEcho(h facts.History, fl facts.Flow, value string, num bool) bool {
	src := fl.Source
	prompt := src.Kind != facts.ToolReturn
	if !prompt && src.ToolCallID == nil {
		return true
	}
	answered := prompt
	var before [][]byte
	for m := range h {
		for p, part := range h[m].Parts {
			at := facts.Position{Message: m, Part: p}
			if part.Kind != facts.ToolCall || !at.Before(src.At) {
				continue
			}
			before = append(before, part.Args)
			if !prompt && part.HasToolCallID && part.ToolCallID == *src.ToolCallID && part.ToolName == src.Tool {
				answered = true
			}
		}
	}
	if !answered {
		return true
	}
	trusting := fl.Match == facts.FlowExact || fl.Match == facts.FlowToken && fl.Whole &&
		(fl.Token == facts.TokenEmail || fl.Token == facts.TokenURL || fl.Token == facts.TokenIBAN || fl.Token == facts.TokenDigits)
	if !trusting {
		return false
	}
	fold := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				b.WriteRune(unicode.ToLower(r))
			}
		}
		return b.String()
	}
	want := fold(value)
	var f float64
	if num {
		var err error
		f, err = strconv.ParseFloat(value, 64)
		if err != nil {
			return false
		}
		want = fold(strconv.FormatFloat(f, 'f', -1, 64))
	}
	for _, args := range before {
		v := facts.ArgsValue(args)
		if want != "" && bruteArgsHold(v, want, fold) || num && bruteArgsNumber(v, f) {
			return true
		}
	}
	return false
}

// bruteArgsNumber: v holds a number equal to f.
func bruteArgsNumber(v any, f float64) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if bruteArgsNumber(e, f) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if bruteArgsNumber(e, f) {
				return true
			}
		}
	case json.Number:
		g, err := strconv.ParseFloat(x.String(), 64)
		return err == nil && g == f
	}
	return false
}

// bruteArgsHold: some string, number or key of v holds want once folded.
func bruteArgsHold(v any, want string, fold func(string) string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.Contains(fold(k), want) || bruteArgsHold(e, want, fold) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if bruteArgsHold(e, want, fold) {
				return true
			}
		}
	case string:
		return strings.Contains(fold(x), want)
	case fmt.Stringer:
		return strings.Contains(fold(x.String()), want)
	}
	return false
}

type bruteToken struct {
	s     string
	cls   facts.TokenClass
	ident bool
	// full: the token's bytes are the whole of s (for an identifier).
	full bool
}

var (
	bruteRun      = regexp.MustCompile(`\S+`)
	bruteColon    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_. -]*:[\t ]`)
	bruteEquals   = regexp.MustCompile(`^[A-Za-z0-9_.-]+=`)
	bruteLocal    = regexp.MustCompile(`[A-Za-z0-9._%+-]*$`)
	bruteDomain   = regexp.MustCompile(`^[A-Za-z0-9.-]*`)
	bruteURL      = regexp.MustCompile(`(?i)https?://[^\t\n\f\r "'<>` + "`" + `]+`)
	bruteIBANHead = regexp.MustCompile(`^[A-Z]{2}[0-9]{2}[A-Z0-9]*`)
	bruteGroup    = regexp.MustCompile(`^[ -][A-Z0-9]+`)
	bruteDigits   = regexp.MustCompile(`^[0-9]+(?:[ -][0-9]+)*`)
	bruteDate     = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}`)
	bruteAlnum    = regexp.MustCompile(`^[A-Za-z0-9]`)
)

// bruteTokens lists the tokens of s (docs/flows.md, "Tokens") with
// regular expressions: every one, repeats included.
func bruteTokens(s string, minLen int) []bruteToken {
	var out []bruteToken
	add := func(cls facts.TokenClass, t string, ident bool, span ...int) {
		if len(t) >= minLen && (ident || t != s) {
			out = append(out, bruteToken{t, cls, ident, ident && span[0] == 0 && span[1] == len(s)})
		}
	}
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		l = strings.Trim(l, " \t\n\f\r")
		if len(lines) > 1 {
			add(facts.TokenLine, l, false)
		}
		if m := bruteColon.FindString(l); m != "" {
			add(facts.TokenPairValue, strings.Trim(l[len(m)-1:], " \t\n\f\r"), false)
		}
		for _, run := range bruteRun.FindAllString(l, -1) {
			add(facts.TokenRun, run, false)
			if m := bruteEquals.FindString(run); m != "" {
				add(facts.TokenPairValue, strings.Trim(run[len(m):], `"'`), false)
			}
		}
	}
	alnumAt := func(i int) bool { return i >= 0 && i < len(s) && bruteAlnum.MatchString(s[i:]) }
	for i := range len(s) {
		if s[i] != '@' {
			continue
		}
		local := strings.TrimLeft(bruteLocal.FindString(s[:i]), ".")
		dom := strings.TrimRight(bruteDomain.FindString(s[i+1:]), ".-")
		if local != "" && dom != "" && !strings.HasPrefix(dom, ".") && strings.Contains(dom, ".") {
			add(facts.TokenEmail, strings.ToLower(local+"@"+dom), true, i-len(local), i+1+len(dom))
		}
	}
	for _, m := range bruteURL.FindAllStringIndex(s, -1) {
		if alnumAt(m[0] - 1) {
			continue
		}
		u := strings.TrimRight(s[m[0]:m[1]], ".,;:!?)]}")
		_, rest, _ := strings.Cut(u, "://")
		if rest == "" {
			continue
		}
		scheme := u[:len(u)-len(rest)]
		host, path := rest, ""
		if k := strings.IndexAny(rest, "/?#"); k >= 0 {
			host, path = rest[:k], rest[k:]
		}
		add(facts.TokenURL, strings.ToLower(scheme+host)+path, true, m[0], m[0]+len(u))
	}
	for i := 0; i < len(s); i++ {
		if alnumAt(i - 1) {
			continue
		}
		head := bruteIBANHead.FindString(s[i:])
		if head == "" {
			continue
		}
		norm, e := head, i+len(head)
		if len(head) == 4 {
			for last := 4; last == 4; {
				g := bruteGroup.FindString(s[e:])
				if g == "" || len(g)-1 > 4 {
					break
				}
				norm += g[1:]
				last = len(g) - 1
				e += len(g)
			}
		}
		if len(norm) >= 15 && len(norm) <= 34 && !alnumAt(e) {
			add(facts.TokenIBAN, norm, true, i, e)
			i = e - 1
		}
	}
	for i := 0; i < len(s); i++ {
		if i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
			continue
		}
		raw := bruteDigits.FindString(s[i:])
		if raw == "" {
			continue
		}
		if !bruteDate.MatchString(raw) {
			add(facts.TokenDigits, strings.NewReplacer(" ", "", "-", "").Replace(raw), true, i, i+len(raw))
		}
		i += len(raw) - 1
	}
	return out
}

type bruteString struct {
	s, path   string
	num, near bool
}

// bruteNumber is the key of a number with at least five significant
// digits, and whether the number is not exactly its key's value (near:
// another number a float cannot tell from it may have the key).
func bruteNumber(n json.Number) (key string, near, ok bool) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return "", false, false
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, _, _ := strings.Cut(e, "e")
	if len(strings.ReplaceAll(strings.TrimPrefix(mant, "-"), ".", "")) < 5 {
		return "", false, false
	}
	exact, _ := new(big.Rat).SetString(string(n))
	shortest, _ := new(big.Rat).SetString(e)
	return e, exact.Cmp(shortest) != 0, true
}

// bruteStrings lists a return value's strings (keys sorted, each before
// its value, nested JSON after its string, four levels) and numbers.
func bruteStrings(v any, depth, minLen int) []bruteString {
	var out []bruteString
	switch v := v.(type) {
	case string:
		if len(v) >= minLen {
			out = append(out, bruteString{s: v})
		}
		t := strings.TrimSpace(v)
		if depth < 4 && t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
			var inner any
			dec := json.NewDecoder(strings.NewReader(t))
			dec.UseNumber()
			if dec.Decode(&inner) == nil {
				out = append(out, bruteStrings(inner, depth+1, minLen)...)
			}
		}
	case json.Number:
		if k, near, ok := bruteNumber(v); ok {
			out = append(out, bruteString{s: k, num: true, near: near})
		}
	case []any:
		for _, e := range v {
			out = append(out, bruteStrings(e, depth, minLen)...)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if len(k) >= minLen {
				out = append(out, bruteString{s: k})
			}
			out = append(out, bruteStrings(v[k], depth, minLen)...)
		}
	}
	return out
}

// bruteLeaves lists the string and number leaves of an argument value
// with their JSON pointers, in document order (keys sorted).
func bruteLeaves(v any, path string) []bruteString {
	switch v := v.(type) {
	case string:
		return []bruteString{{s: v, path: path}}
	case json.Number:
		if k, near, ok := bruteNumber(v); ok {
			return []bruteString{{s: k, path: path, num: true, near: near}}
		}
	case []any:
		var out []bruteString
		for i, e := range v {
			out = append(out, bruteLeaves(e, fmt.Sprintf("%s/%d", path, i))...)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []bruteString
		for _, k := range keys {
			tok := strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			out = append(out, bruteLeaves(v[k], path+"/"+tok)...)
		}
		return out
	}
	return nil
}

// flowHistory generates a history whose calls copy values of earlier
// returns into their arguments: whole strings, strings inside longer
// ones, parts of strings, numbers, and strings of JSON-encoded returns.
type flowHistory struct {
	rnd  *rand.Rand
	pool []string // strings returned so far
	nums []string // numbers returned so far
	id   int
}

var flowAlphabet = []byte("ab/~-")

// tokenPieces are what texts are made of: identifiers, pairs, dates.
var tokenPieces = []string{
	"ann@ex.com", "Bob.x@Mail.ORG", "c+d@a-b.io.", "x@y", "HTTPS://Ex.com/aB?x=1", "http://WWW.Site.io/p.", "https://ex.com",
	"GB29NWBK60161331926819", "GB29 NWBK 6016 1331 9268 19", "DE89-3704-0044-0532-0130-00", "XX12 AB12 3456 7890 1234",
	"US133000000121212121212", "gb29nwbk60161331926819", "555-123-4567", "4111 1111 1111 1111", "2024-05-15 10", "12345678",
	"1234 5", "Key: some value", "k=abc-def-gh", "k='quoted-val'", "Note: a:b", "9 to:x",
}

// text is a string of a few pieces and words, on one line or several.
func (g *flowHistory) text() string {
	seps := []string{" ", "\n", "  ", ", ", "\t", " \n "}
	var b strings.Builder
	for i := range 1 + g.rnd.IntN(5) {
		if i > 0 {
			b.WriteString(seps[g.rnd.IntN(len(seps))])
		}
		if g.rnd.IntN(3) == 0 {
			b.WriteString(g.word())
		} else {
			b.WriteString(tokenPieces[g.rnd.IntN(len(tokenPieces))])
		}
	}
	return b.String()
}

// variant is a piece of s (a line, a run, a piece) as a model might
// write it: as it is, re-cased, or with an identifier's separators
// changed; alone (the whole value) or between two words.
func (g *flowHistory) variant(s string) string {
	parts := strings.Fields(s)
	if lines := strings.Split(s, "\n"); g.rnd.IntN(2) == 0 && len(lines) > 1 {
		parts = lines
	}
	if len(parts) == 0 {
		return s
	}
	p := parts[g.rnd.IntN(len(parts))]
	var in []string
	for _, piece := range tokenPieces {
		if strings.Contains(s, piece) {
			in = append(in, piece)
		}
	}
	if len(in) > 0 && g.rnd.IntN(3) > 0 {
		p = in[g.rnd.IntN(len(in))]
	}
	if _, v, ok := strings.Cut(p, "="); ok && g.rnd.IntN(2) == 0 {
		p = v // a pair's value alone
	} else if _, v, ok := strings.Cut(p, ": "); ok && g.rnd.IntN(2) == 0 {
		p = v
	}
	switch g.rnd.IntN(5) {
	case 0:
		p = strings.ToLower(p)
	case 1:
		p = strings.ToUpper(p)
	case 2:
		p = strings.NewReplacer(" ", "", "-", " ").Replace(p)
	}
	if g.rnd.IntN(2) == 0 {
		return p
	}
	return g.word() + " " + p + " " + g.word()
}

// piece is, alone, a token piece s holds, or a pair's value of it, or
// else a run of s: an argument that is one token as a whole.
func (g *flowHistory) piece(s string) string {
	var in []string
	for _, piece := range tokenPieces {
		if strings.Contains(s, piece) {
			in = append(in, piece)
		}
	}
	if len(in) == 0 {
		if f := strings.Fields(s); len(f) > 0 {
			return f[g.rnd.IntN(len(f))]
		}
		return s
	}
	p := in[g.rnd.IntN(len(in))]
	if _, v, ok := strings.Cut(p, "="); ok {
		return strings.Trim(v, `"'`)
	}
	if _, v, ok := strings.Cut(p, ": "); ok {
		return v
	}
	return p
}

func (g *flowHistory) word() string {
	b := make([]byte, 1+g.rnd.IntN(14))
	for i := range b {
		b[i] = flowAlphabet[g.rnd.IntN(len(flowAlphabet))]
	}
	return string(b)
}

func (g *flowHistory) number() string {
	if g.rnd.IntN(10) == 0 {
		// Past a float's digits: an integer past 2^53 and its
		// neighbours, one of them its float's shortest form, or a decimal
		// equal as a float to 12300.
		return []string{"1234567890123456789", "1234567890123456800", "1.2345678901234568e18", "12300.000000000000001"}[g.rnd.IntN(4)]
	}
	switch g.rnd.IntN(4) {
	case 0:
		return strconv.Itoa(g.rnd.IntN(2000) - 1000)
	case 1:
		return strconv.Itoa(10000 + g.rnd.IntN(200))
	case 2:
		return fmt.Sprintf("%d.%02d", 100+g.rnd.IntN(5), g.rnd.IntN(100))
	}
	return strconv.Itoa(12300 + g.rnd.IntN(3))
}

// value is a return value: new strings and numbers join the pool.
func (g *flowHistory) value(depth int) any {
	switch k := g.rnd.IntN(10); {
	case k < 4 || depth > 2:
		s := g.word()
		if g.rnd.IntN(3) > 0 {
			s = g.text()
		}
		if g.rnd.IntN(3) == 0 && len(g.pool) > 0 {
			s = g.pool[g.rnd.IntN(len(g.pool))] // the same string again
		}
		g.pool = append(g.pool, s)
		return s
	case k < 6:
		n := g.number()
		g.nums = append(g.nums, n)
		return json.Number(n)
	case k < 7:
		enc, _ := json.Marshal(g.value(depth + 1))
		return string(enc) // JSON inside a string
	case k < 8:
		out := []any{}
		for range g.rnd.IntN(3) {
			out = append(out, g.value(depth+1))
		}
		return out
	default:
		out := map[string]any{}
		for range 1 + g.rnd.IntN(3) {
			key := g.word()
			g.pool = append(g.pool, key)
			out[key] = g.value(depth + 1)
		}
		return out
	}
}

// arg is an argument value, mostly copied from what was returned.
func (g *flowHistory) arg() any {
	pick := func() string {
		if len(g.pool) == 0 {
			return g.word()
		}
		return g.pool[g.rnd.IntN(len(g.pool))]
	}
	switch g.rnd.IntN(14) {
	case 8, 9, 10, 11:
		return g.variant(pick())
	case 12, 13:
		return g.piece(pick())
	case 0:
		return pick()
	case 1:
		return g.word() + pick() + g.word()
	case 2:
		s := pick()
		i := g.rnd.IntN(len(s) + 1)
		return s[i:] + pick()
	case 3:
		if len(g.nums) > 0 {
			return json.Number(g.nums[g.rnd.IntN(len(g.nums))])
		}
		return json.Number(g.number())
	case 4:
		return []any{pick(), g.word()}
	case 5:
		return map[string]any{"a/b": pick(), "~": pick() + pick()}
	case 6:
		return g.word()
	}
	return json.Number(g.number())
}

func (g *flowHistory) returnPart(kind facts.PartKind, tool string) facts.Part {
	content, _ := json.Marshal(g.value(0))
	g.id++
	p := facts.Part{Kind: kind, ToolName: tool, Content: content}
	if g.rnd.IntN(5) > 0 {
		p.ToolCallID, p.HasToolCallID = fmt.Sprintf("r%d", g.id), true
	}
	return p
}

func (g *flowHistory) callPart(tool string) facts.Part {
	var args []byte
	switch g.rnd.IntN(6) {
	case 0:
		args, _ = json.Marshal(g.arg()) // not an object
	case 1:
		inner, _ := json.Marshal(map[string]any{"x": g.arg()})
		args, _ = json.Marshal(string(inner)) // an object as a string
	default:
		obj := map[string]any{}
		for range 1 + g.rnd.IntN(3) {
			obj[g.word()] = g.arg()
		}
		args, _ = json.Marshal(obj)
	}
	g.id++
	return facts.Part{Kind: facts.ToolCall, ToolName: tool, Args: args, ToolCallID: fmt.Sprintf("c%d", g.id), HasToolCallID: true}
}

func (g *flowHistory) history(n int) facts.History {
	tools := []string{"read_secret", "send_email", "other"}
	var h facts.History
	for m := range n {
		if m%2 == 0 {
			msg := facts.Message{Kind: facts.Request}
			for range g.rnd.IntN(3) {
				switch g.rnd.IntN(10) {
				case 0:
					msg.Parts = append(msg.Parts, facts.Part{Kind: facts.UserPrompt})
				case 1:
					p := g.returnPart(facts.UserPrompt, "")
					p.HasToolCallID, p.ToolCallID = false, ""
					msg.Parts = append(msg.Parts, p)
				case 2:
					p := g.returnPart(facts.SystemPrompt, "")
					p.HasToolCallID, p.ToolCallID = false, ""
					msg.Parts = append(msg.Parts, p)
				case 3:
					msg.Parts = append(msg.Parts, g.returnPart(facts.RetryPrompt, tools[g.rnd.IntN(len(tools))]))
				case 4:
					msg.Parts = append(msg.Parts, g.returnPart(facts.RetryPrompt, "")) // names no tool: no source
				default:
					msg.Parts = append(msg.Parts, g.returnPart(facts.ToolReturn, tools[g.rnd.IntN(len(tools))]))
				}
			}
			h = append(h, msg)
			continue
		}
		msg := facts.Message{Kind: facts.Response}
		for range 1 + g.rnd.IntN(4) {
			switch g.rnd.IntN(6) {
			case 0:
				msg.Parts = append(msg.Parts, g.returnPart(facts.BuiltinToolReturn, "web_search"))
			case 1:
				msg.Parts = append(msg.Parts, facts.Part{Kind: facts.Compaction})
			default:
				msg.Parts = append(msg.Parts, g.callPart(tools[g.rnd.IntN(len(tools))]))
			}
		}
		h = append(h, msg)
	}
	return h
}

func flowRegistry(t *testing.T) *facts.Registry {
	t.Helper()
	reg, err := facts.NewRegistry(
		[]facts.Capability{{ID: "vault", Labels: []string{"secret"}}},
		[]facts.Tool{
			{Name: "read_secret", Capability: "vault"},
			{Name: "send_email", Labels: []string{"external"}},
			{Name: "other"},
		})
	require.NoError(t, err)
	return reg
}

// TestFlowsAgreeWithBruteForce compares the flows of random histories,
// whose calls copy returned values, with the brute-force definition, and
// the Tracker with Derive on every prefix, under random minimum
// lengths and caps (small ones truncate the index).
func TestFlowsAgreeWithBruteForce(t *testing.T) {
	reg := flowRegistry(t)
	seeds := 400
	if testing.Short() {
		seeds = 50
	}
	found := map[facts.FlowMatch]int{}
	tokens := map[facts.TokenClass]int{}
	whole := map[facts.TokenClass][2]int{} // token flows by class: [not whole, whole]
	kinds := map[facts.PartKind]int{}
	truncated := 0
	for seed := range seeds {
		g := &flowHistory{rnd: rand.New(rand.NewPCG(uint64(seed), 33))}
		h := g.history(2 + g.rnd.IntN(14))
		o := facts.Options{Flows: true, FlowMinLength: 1 + g.rnd.IntN(10), FlowTokens: seed%2 == 1}
		limit := facts.DefaultFlowIndexCap
		if seed%3 == 0 {
			o.FlowIndexCap = 1 + g.rnd.IntN(300)
			limit = o.FlowIndexCap
		}
		tr := facts.NewTracker(reg, o)
		for n := 1; n <= len(h); n++ {
			tr.Append(h[n-1])
			got := facts.Derive(h[:n], reg, o)
			require.Equal(t, got, tr.FactsWith(o), "seed %d, prefix of %d messages", seed, n)
			want, trunc := bruteFlows(h[:n], reg, o.FlowMinLength, limit, o.FlowTokens)
			require.Equal(t, trunc, got.FlowIndexTruncated, "seed %d, prefix %d: truncated", seed, n)
			if trunc {
				truncated++
			}
			if got.Dispatch == nil {
				require.Nil(t, want)
				continue
			}
			require.Len(t, got.Dispatch.Calls, len(want))
			for i, c := range got.Dispatch.Calls {
				require.Equal(t, want[i], c.Flows, "seed %d, prefix %d, call %d (%s)", seed, n, i, c.Args)
				for _, f := range c.Flows {
					found[f.Match]++
					tokens[f.Token]++
					if f.Match == facts.FlowToken {
						w := whole[f.Token]
						w[btoi(f.Whole)]++
						whole[f.Token] = w
					}
					kinds[f.Source.Kind]++
				}
			}
			flows, trunc2 := facts.Flows(h[:n], reg, o)
			require.Equal(t, trunc, trunc2)
			for i := range want {
				require.Equal(t, want[i], flows[i])
			}
		}
	}
	// The generator exercises what it is meant to.
	require.Greater(t, found[facts.FlowExact], 100, "exact matches")
	require.Greater(t, found[facts.FlowContains], 100, "contains matches")
	atLeast := func(n int) int { return n * seeds / 800 } // half what 400 seeds give
	require.Greater(t, found[facts.FlowToken], atLeast(100), "token matches")
	for c := facts.TokenEmail; c <= facts.TokenRun; c++ {
		require.Greater(t, tokens[c], atLeast(10), "token matches of class %s (%v)", c, tokens)
		if !testing.Short() { // too few seeds to see both of every class
			require.Greater(t, whole[c][0], atLeast(5), "token matches of class %s not whole (%v)", c, whole)
			require.Greater(t, whole[c][1], atLeast(5), "whole token matches of class %s (%v)", c, whole)
		}
	}
	for _, k := range []facts.PartKind{facts.ToolReturn, facts.BuiltinToolReturn, facts.UserPrompt, facts.SystemPrompt, facts.RetryPrompt} {
		require.Greater(t, kinds[k], atLeast(10), "flows from a %s", k)
	}
	require.Greater(t, truncated, 10, "truncated indexes")
	t.Logf("token flows by class, [not whole, whole]: %v", whole)
}

// TestFlowsOnlyWhenAsked: without Options.Flows no call carries flows,
// and with them every call does (never nil).
func TestFlowsOnlyWhenAsked(t *testing.T) {
	reg := flowRegistry(t)
	g := &flowHistory{rnd: rand.New(rand.NewPCG(1, 2))}
	h := g.history(10)
	for _, c := range facts.Derive(h, reg).Dispatch.Calls {
		require.Nil(t, c.Flows)
	}
	for _, c := range facts.Derive(h, reg, facts.Options{Flows: true}).Dispatch.Calls {
		require.NotNil(t, c.Flows)
	}
}

// TestFlowsExample pins one history's flows: an exact copy, a copy
// inside a longer string, a string of JSON-encoded content, a number,
// a source before the compaction, and what is not a flow (a short
// string, a part of a returned string, a trivial number).
func TestFlowsExample(t *testing.T) {
	reg := flowRegistry(t)
	id := "r1"
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "read_secret", ToolCallID: id, HasToolCallID: true,
			Content: []byte(`{"key":"sk-live-4242","note":"{\"pin\":\"hunter22\"}","balance":123456,"count":7,"short":"abc"}`)}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.Compaction}}},
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send_email", ToolCallID: "c1", HasToolCallID: true,
			Args: []byte(`{"to":"sk-live-4242","body":"the pin is hunter22, ok?","n":123456,"c":7,"s":"abc","part":"sk-live"}`)}}},
	}
	f := facts.Derive(h, reg, facts.Options{Flows: true})
	src := facts.FlowSource{Kind: facts.ToolReturn, ToolCallID: &id, Tool: "read_secret", Labels: []string{"secret"}, At: facts.Position{}}
	require.Equal(t, []facts.Flow{
		// No call of r1 in the history: the return cannot vouch.
		{Path: "/body", Match: facts.FlowContains, Source: src, EchoOfTheAgent: true},
		{Path: "/n", Match: facts.FlowExact, Whole: true, Source: src, EchoOfTheAgent: true},
		{Path: "/to", Match: facts.FlowExact, Whole: true, Source: src, EchoOfTheAgent: true},
	}, f.Dispatch.Calls[0].Flows)
	require.False(t, f.FlowIndexTruncated)
	f = facts.Derive(h, reg, facts.Options{Flows: true, FlowIndexCap: 5})
	require.True(t, f.FlowIndexTruncated)
	require.Equal(t, []facts.Flow{}, f.Dispatch.Calls[0].Flows)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestEchoChecksAreBounded: whether a return echoes what the agent sent
// is checked against the arguments of the calls before it, each read
// once and counted against the call's comparison budget: a model that
// made many calls with huge arguments, each answered by a return holding
// the value a later call copies, cannot make the check outlive the
// budget. Past it
// the flows are incomplete (FlowIndexTruncated) and an unchecked return
// counts as echoing (it vouches for nothing); Derive and a Tracker agree.
func TestEchoChecksAreBounded(t *testing.T) {
	reg := flowRegistry(t)
	big := []byte(`{"q":"` + strings.Repeat("x", 100<<10) + `"}`)
	var h facts.History
	for i := range 200 {
		id := fmt.Sprintf("c%d", i)
		h = append(h,
			facts.Message{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "read_secret", ToolCallID: id, HasToolCallID: true, Args: big}}},
			facts.Message{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "read_secret", ToolCallID: id, HasToolCallID: true,
				Content: []byte(`"sk-live-secret-1234"`)}}})
	}
	h = append(h, facts.Message{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send_email", ToolCallID: "s", HasToolCallID: true,
		Args: []byte(`{"to":"sk-live-secret-1234"}`)}}})
	f := facts.Derive(h, reg, facts.Options{Flows: true})
	require.True(t, f.FlowIndexTruncated, "20 MB of call arguments checked within a 16 MB budget")
	flows := f.Dispatch.Calls[0].Flows
	require.NotEmpty(t, flows)
	checked, unchecked := 0, 0
	for _, fl := range flows {
		if fl.EchoOfTheAgent {
			unchecked++ // the calls hold no such value: only an unchecked one echoes
		} else {
			checked++
		}
	}
	require.Equal(t, 200, checked+unchecked)
	require.Positive(t, unchecked, "past the budget a return whose call was not checked vouches for nothing")
	require.Less(t, checked, 200)
	tr := facts.NewTracker(reg, facts.Options{Flows: true})
	tr.Append(h...)
	got := tr.FactsWith(facts.Options{Flows: true})
	require.Equal(t, f.FlowIndexTruncated, got.FlowIndexTruncated)
	require.Equal(t, flows, got.Dispatch.Calls[0].Flows)
}
