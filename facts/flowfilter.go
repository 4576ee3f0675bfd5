package facts

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/policycheck/policycheck/facts/internal/jsonvalue"
)

// The prefilter of a one-shot derivation (Derive, Flows; flows.go,
// "Search"). There the dispatched calls' argument leaves are known before
// any return is indexed, and a return that cannot hold a match for any
// of them need not be walked nor indexed. flowFilter is built from the
// leaves; it reads each source part's raw content once and says whether
// the return may hold a match. Only the returns that may are indexed, by
// the exact code; so the filter must only ever be a necessary condition.
// It is, by these arguments (flowfilter_test.go compares the filtered
// derivation with the full index, fuzzed):
//
//   - A match of a leaf L by a whole string or a token compared as is
//     (exact, contains, line, pair value, run) is a string s of the
//     return, of at least FlowMinLength (m) bytes, that L holds. s is a
//     decoded JSON string of the content (at most NestDepth levels of
//     JSON inside strings deep) or a part of one. The content decoded
//     once (every escape read once) holds every such s as is when it
//     holds no backslash itself: a JSON string inside a string is then
//     free of escapes. So the first w bytes of s (w = min(m, 8)) are a
//     window of L and of the once-decoded content, right after the
//     string's opening quote (a whole string), or after a quote,
//     whitespace or '=' (a line, run or pair value: trimSpace, runs
//     split at whitespace, a "key: value" value after ": " and
//     whitespace, a "key=value" value after '=' or a quote). A content
//     whose decoding still holds a backslash, or holds a lone surrogate
//     or invalid escape, or is not UTF-8, passes without being looked at.
//   - A match of an identifier is a normalised token t of L equal to the
//     normalised form of a span of a return string, itself a substring
//     of the once-decoded content. An email's span is ASCII with one '@'
//     and compared lower-cased: the content holds t, in any case, around
//     an '@'. A URL's is compared with the ASCII capitals of its scheme
//     and host lower-cased (asciiLower): spans equal so are equal
//     lower-cased rune by rune (unicode.ToLower, which the filter uses:
//     the Kelvin sign is a 'k'), and lower-casing again changes nothing
//     (ToLower is idempotent, checked for every rune), so the content
//     holds, after a "://", bytes whose lower-cased form starts with t's
//     after its "://". An IBAN's or
//     digit run's is compared without spaces and hyphens: let fold
//     lower-case each rune and drop spaces and hyphens; fold(t) is a
//     substring of the folded content, and each of its w-byte windows is
//     there (a token folding shorter than w turns the filter off).
//   - A number leaf matches a return number of equal value (the same
//     float64). The key is the shortest decimal that reads as it, of
//     k ≥ 5 significant digits; a number's text reading as it agrees with
//     the key on the first k−1 (numberTexts), so the content holds the
//     key's first four significant digits, '.' after one of the first
//     three or none.
//
// The cap (Options.FlowIndexCap) counts what the index would hold; a
// return the filter skips is counted by an upper bound of that
// (fastBound, skipBound; FuzzSkipBound checks them against the exact
// count). When the filtered derivation ends truncated, past a comparison
// budget, or its filter off, the flows are derived again from the full
// index: under the cap the count by bounds is above the exact count, so
// a filtered derivation that ends complete is one the full index would
// end complete too, with the same flows (a string the matching compares
// lies under a prefix the leaf holds, so its return passed: the
// comparison budgets are spent alike); the rest are derived as before.

// tokenStarts are the bytes a string or a token compared as is starts
// after, in the content decoded once: the string's opening quote, and
// for a line or run whitespace, for a pair value whitespace, '=' or the
// quote trimmed from it.
var tokenStarts = func() (t [256]bool) {
	for _, c := range []byte("\"'= \t\n\f\r") {
		t[c] = true
	}
	return t
}()

// filterWindow is the longest window, in bytes, the filter compares.
const filterWindow = 8

// flowFilter is the prefilter built from a response's calls' leaves.
type flowFilter struct {
	// w is the window length, min(minLen, filterWindow).
	w int
	// raw holds the w-byte windows of the string leaves; folded those
	// of the folded forms of their IBANs and digit runs (appendFold).
	raw, folded windowSet
	// emails are the leaves' emails (lower-cased, each with the index
	// of its '@'), urls their URLs (appendLower, each with the index
	// after its "://"); nums the first four significant digits of the
	// number leaves, each as the texts a JSON number shows them in.
	emails, urls []anchored
	nums         [][][]byte
	tokens       bool
	// dec and fold are scratch: the content decoded once, and folded.
	dec, fold []byte
}

// anchored is an identifier and the index of its anchor.
type anchored struct {
	t  []byte
	at int
}

// windowSet is a set of windows (up to 8 bytes packed in a uint64): a
// bitset of their hashes in front of the exact set.
type windowSet struct {
	shift uint
	bits  []uint64
	exact map[uint64]struct{}
}

func (s *windowSet) init(n int) {
	b := max(16, min(22, bits.Len(uint(n))+6))
	s.shift = uint(64 - b)
	s.bits = make([]uint64, 1<<(b-6))
	s.exact = make(map[uint64]struct{}, n)
}

func (s *windowSet) hash(v uint64) uint64 { return (v * 0x9E3779B97F4A7C15) >> s.shift }

func (s *windowSet) add(v uint64) {
	h := s.hash(v)
	s.bits[h>>6] |= 1 << (h & 63)
	s.exact[v] = struct{}{}
}

func (s *windowSet) has(v uint64) bool {
	h := s.hash(v)
	if s.bits[h>>6]&(1<<(h&63)) == 0 {
		return false
	}
	_, ok := s.exact[v]
	return ok
}

// addWindows adds every w-byte window of b.
func (s *windowSet) addWindows(b []byte, w int) {
	var v uint64
	mask := windowMask(w)
	for i, c := range b {
		v = v<<8 | uint64(c)
		if i+1 >= w {
			s.add(v & mask)
		}
	}
}

// anyAnchored reports whether a w-byte window of b that starts right
// after an anchor byte is in s.
func (s *windowSet) anyAnchored(b []byte, w int, anchor *[256]bool) bool {
	mask := windowMask(w)
	for i := 0; i+w < len(b); i++ { // b[i] the anchor, the window b[i+1:i+1+w]
		if !anchor[b[i]] {
			continue
		}
		if s.has(packWindow(b[i+1:], w) & mask) {
			return true
		}
	}
	return false
}

// packWindow packs the first w bytes of b (at least w).
func packWindow(b []byte, w int) uint64 {
	if w == 8 {
		return binary.BigEndian.Uint64(b)
	}
	var v uint64
	for _, x := range b[:w] {
		v = v<<8 | uint64(x)
	}
	return v
}

// anyAfter reports whether a w-byte window of b that starts right after
// a byte c is in s.
func (s *windowSet) anyAfter(b []byte, w int, c byte) bool {
	mask := windowMask(w)
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], c)
		if j < 0 {
			return false
		}
		i += j + 1
		if i+w > len(b) {
			return false
		}
		if s.has(packWindow(b[i:], w) & mask) {
			return true
		}
	}
}

// any reports whether a w-byte window of b is in s.
func (s *windowSet) any(b []byte, w int) bool {
	var v uint64
	mask := windowMask(w)
	for i, c := range b {
		v = v<<8 | uint64(c)
		if i+1 >= w && s.has(v&mask) {
			return true
		}
	}
	return false
}

func windowMask(w int) uint64 {
	if w >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*w) - 1
}

// newFlowFilter builds the filter of the calls' arguments, or returns
// nil when it cannot be used (a leaf whose IBAN or digit run folds
// shorter than the window).
func newFlowFilter(o Options, calls []Call, vals []any) *flowFilter {
	minLen := o.flowMinLength()
	f := &flowFilter{w: min(minLen, filterWindow), tokens: o.FlowTokens}
	var strs []string
	for i := range calls {
		jsonvalue.VisitArgs(vals[i], func(_, leaf string, num, _ bool) {
			switch {
			case num:
				f.nums = append(f.nums, numberTexts(leaf))
			case len(leaf) >= minLen:
				strs = append(strs, leaf)
			}
		})
	}
	n := 0
	for _, s := range strs {
		n += len(s)
	}
	f.raw.init(n)
	if f.tokens {
		f.folded.init(n)
	}
	ok := true
	for _, s := range strs {
		f.raw.addWindows([]byte(s), f.w)
		if !f.tokens {
			continue
		}
		identSpans(s, minLen, func(c TokenClass, t string, _, _ int) {
			switch c {
			case TokenEmail:
				f.emails = append(f.emails, anchored{t: []byte(t), at: strings.IndexByte(t, '@')})
			case TokenURL:
				f.urls = append(f.urls, anchored{t: appendLower(nil, []byte(t)), at: strings.Index(t, "://") + 3})
			default:
				f.fold = appendFold(f.fold[:0], []byte(t))
				if len(f.fold) < f.w {
					ok = false
					return
				}
				f.folded.addWindows(f.fold, f.w)
			}
		})
	}
	if !ok {
		return nil
	}
	return f
}

// numberTexts returns the texts the first four significant digits of a
// number key (d.ddde±xx, at least five significant digits) show in a
// JSON number whose shortest form is the key: the digits, and the digits
// with a '.' after the first, second or third. (The shortest form has
// the fewest digits of the decimals that read as the number; a decimal
// that reads as it too agrees with the key's k ≥ 5 significant digits
// on the first k−1: were they different, a decimal of k−1 digits would
// lie between the two, hence read as the number too.)
func numberTexts(key string) [][]byte {
	var d []byte
	for i := 0; i < len(key) && key[i] != 'e' && len(d) < 4; i++ {
		if c := key[i]; isDigit(c) && (len(d) > 0 || c != '0') {
			d = append(d, c)
		}
	}
	out := [][]byte{d}
	for k := 1; k < len(d); k++ {
		out = append(out, append(append(append([]byte{}, d[:k]...), '.'), d[k:]...))
	}
	return out
}

// appendFold appends fold(b) to dst: each rune lower-cased
// (unicode.ToLower), spaces and hyphens dropped. b is UTF-8.
func appendFold(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == ' ' || c == '-':
			case 'A' <= c && c <= 'Z':
				dst = append(dst, c+'a'-'A')
			default:
				dst = append(dst, c)
			}
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		i += n
		if l := unicode.ToLower(r); l != ' ' && l != '-' {
			dst = utf8.AppendRune(dst, l)
		}
	}
	return dst
}

// appendLower appends b with each rune lower-cased (unicode.ToLower) to
// dst. b is UTF-8.
func appendLower(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			i++
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		i += n
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst
}

// hasLowerPrefix reports whether appendLower(b) starts with p.
func hasLowerPrefix(b, p []byte) bool {
	for i := 0; len(p) > 0; {
		if i >= len(b) {
			return false
		}
		c := b[i]
		if c < utf8.RuneSelf {
			i++
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if p[0] != c {
				return false
			}
			p = p[1:]
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		i += n
		var buf [utf8.UTFMax]byte
		l := utf8.EncodeRune(buf[:], unicode.ToLower(r))
		if len(p) < l || !bytes.Equal(p[:l], buf[:l]) {
			return false
		}
		p = p[l:]
	}
	return true
}

// pass reports whether content may hold a match of the filter's leaves
// (a necessary condition, see above).
func (f *flowFilter) pass(content []byte) bool {
	if !utf8.Valid(content) {
		return true
	}
	if len(f.raw.exact) == 0 && len(f.folded.exact) == 0 && len(f.nums) == 0 && len(f.emails) == 0 && len(f.urls) == 0 {
		return false
	}
	d := content
	if bytes.IndexByte(content, '\\') >= 0 {
		var ok bool
		if f.dec, ok = jsonvalue.AppendUnescaped(f.dec[:0], content); !ok || bytes.IndexByte(f.dec, '\\') >= 0 {
			return true
		}
		d = f.dec
	}
	if len(f.raw.exact) > 0 {
		if f.tokens {
			if f.raw.anyAnchored(d, f.w, &tokenStarts) {
				return true
			}
		} else if f.raw.anyAfter(d, f.w, '"') {
			return true
		}
	}
	for _, n := range f.nums {
		if anyNumber(d, n) {
			return true
		}
	}
	if len(f.emails) > 0 && f.anyEmail(d) || len(f.urls) > 0 && f.anyURL(d) {
		return true
	}
	if len(f.folded.exact) > 0 {
		f.fold = appendFold(f.fold[:0], d)
		if f.folded.any(f.fold, f.w) {
			return true
		}
	}
	return false
}

// anyNumber reports whether d holds one of texts (numberTexts: the
// same first byte) at one of the places that byte is.
func anyNumber(d []byte, texts [][]byte) bool {
	for i := 0; ; i++ {
		j := bytes.IndexByte(d[i:], texts[0][0])
		if j < 0 {
			return false
		}
		i += j
		for _, t := range texts {
			if bytes.HasPrefix(d[i:], t) {
				return true
			}
		}
	}
}

// anyEmail reports whether d holds one of the emails, its letters in any
// case, around an '@'. (An email of a return is its bytes lower-cased.)
func (f *flowFilter) anyEmail(d []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(d[i:], '@')
		if j < 0 {
			return false
		}
		i += j
		for _, e := range f.emails {
			if s := i - e.at; s >= 0 && s+len(e.t) <= len(d) && bytes.EqualFold(d[s:s+len(e.t)], e.t) {
				return true
			}
		}
		i++
	}
}

// anyURL reports whether d holds, after a "://", what one of the URLs
// holds after its "://", both lower-cased (appendLower). (A URL of a
// return is its bytes with the scheme and host lower-cased; lower-casing
// again changes nothing.)
func (f *flowFilter) anyURL(d []byte) bool {
	for i := 0; ; {
		j := bytes.Index(d[i:], []byte("://"))
		if j < 0 {
			return false
		}
		i += j + 3
		for _, u := range f.urls {
			if hasLowerPrefix(d[i:], u.t[u.at:]) {
				return true
			}
		}
	}
}

// skipBound is an upper bound of what indexing content adds to the cap's
// count (flowIndex.used), read from its bytes: a JSON string of n bytes
// (quotes aside) holds at most n decoded bytes, and cutting it into
// tokens adds at most 11n (lines, pair values, runs and key=value values
// 4n, emails 2n — an email ends at an '@' on either side —, URLs 3n —
// lower-casing at most triples a byte —, IBANs and digit runs n each); a
// number's key is at most 24 bytes and its text, five significant digits
// or more, at least 5; a string that may hold JSON (its first byte other
// than whitespace, an escape or a non-ASCII byte is '{' or '[') counts
// NestDepth+1 times, once for each level its bytes may be read at. The
// content must be UTF-8 (an invalid byte decodes to three).
func skipBound(content []byte, tokens bool) int {
	per := 5 // a byte outside strings, or of a string without tokens (numbers inside a nested one)
	if tokens {
		per = 12
	}
	total := 0
	for i := 0; i < len(content); {
		q := bytes.IndexByte(content[i:], '"')
		if q < 0 {
			return total + 5*(len(content)-i)
		}
		total += 5 * q
		s := i + q + 1 // the string's first byte
		nested := mayHoldJSON(content, s)
		e := stringEnd(content, s)
		n := e - s
		if nested {
			n *= jsonvalue.NestDepth + 1
		}
		total += per * n
		i = e + 1
	}
	return total
}

// fastBound is skipBound, or above it, read from fewer of content's
// bytes: every byte counted as a string's, and the strings that may hold
// JSON found from the '{' and '[' in content, a string's first such
// byte being preceded only by whitespace, non-ASCII bytes or escapes
// back to its opening quote. A content with a \u escape, or where an
// escape may stand before a '{' or '[', is read by skipBound.
func fastBound(content []byte, tokens bool) int {
	per := 5
	if tokens {
		per = 12
	}
	if bytes.Contains(content, []byte(`\u`)) {
		return skipBound(content, tokens)
	}
	total := per * len(content)
	for _, brace := range []byte("{[") {
		for i := 0; ; i++ {
			k := bytes.IndexByte(content[i:], brace)
			if k < 0 {
				break
			}
			i += k
			j := i - 1
			for j >= 0 && (content[j] == ' ' || content[j] == '\t' || content[j] == '\n' || content[j] == '\v' || content[j] == '\f' || content[j] == '\r' || content[j] >= utf8.RuneSelf) {
				j--
			}
			switch {
			case j < 0:
			case content[j] == '"':
				total += jsonvalue.NestDepth * per * (stringEnd(content, j+1) - (j + 1))
			case isAlnum(content[j]) && bytes.IndexByte(content[max(0, j-5):j], '\\') >= 0:
				return skipBound(content, tokens)
			}
		}
	}
	return total
}

// mayHoldJSON reports whether the JSON string whose first byte is
// content[s] may hold JSON: its first byte other than ASCII whitespace,
// an escape or a non-ASCII byte is '{' or '['.
func mayHoldJSON(content []byte, s int) bool {
	for j := s; j < len(content); {
		switch c := content[j]; {
		case c == '{' || c == '[':
			return true
		case c == '\\':
			if j+1 < len(content) && content[j+1] == 'u' {
				return true // \u007b is '{'
			}
			j += 2
		case c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c >= utf8.RuneSelf:
			j++
		default:
			return false
		}
	}
	return false
}

// stringEnd returns the index of the quote ending the JSON string whose
// first byte is content[s], or len(content).
func stringEnd(content []byte, s int) int {
	for j := s; j < len(content); {
		q := bytes.IndexByte(content[j:], '"')
		if q < 0 {
			break
		}
		b := bytes.IndexByte(content[j:j+q], '\\')
		if b < 0 {
			return j + q
		}
		j += b + 2
	}
	return len(content)
}
