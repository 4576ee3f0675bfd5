package facts

import "strings"

// Token flows (Options.FlowTokens, docs/flows.md "Tokens"): besides its
// whole strings, a source's strings are cut into tokens, and an argument
// string that holds one of them (or, for the identifier classes, holds
// an identifier equal to one after normalisation) flows from the source
// with match "token" and the token's class.

// TokenClass is the class of a token a flow was found by (Flow.Token).
// The classes are listed in the order a flow names one: when a value
// matched a source by tokens of several classes, the flow names the
// first.
type TokenClass uint8

// Token classes.
const (
	// TokenEmail: an address local@domain.tld, compared lower-cased.
	TokenEmail TokenClass = iota + 1
	// TokenURL: an http:// or https:// URL up to whitespace or a quote,
	// trailing punctuation dropped, its scheme and host compared with
	// their ASCII capitals lower-cased (no other rune: IDNA reads a
	// capital I with a dot as another host than "i").
	TokenURL
	// TokenIBAN: two capital letters, two digits and 11 to 30 capitals
	// or digits, either in one run or in groups of four separated by
	// single spaces or hyphens, compared without the separators.
	TokenIBAN
	// TokenDigits: a run of digits, single spaces or hyphens between
	// two digits allowed, compared without them (a run starting with a
	// date, 2024-05-15, is none).
	TokenDigits
	// TokenPairValue: the value of a "key: value" line or of a
	// "key=value" run, compared as is.
	TokenPairValue
	// TokenLine: a line of a string of several lines, surrounding
	// whitespace dropped, compared as is.
	TokenLine
	// TokenRun: a whitespace-separated run, compared as is.
	TokenRun
)

var tokenClassNames = [...]string{TokenEmail: "email", TokenURL: "url", TokenIBAN: "iban",
	TokenDigits: "digits", TokenPairValue: "pair_value", TokenLine: "line", TokenRun: "run"}

// String returns the class's name in the input document ("" for none).
func (c TokenClass) String() string {
	if int(c) < len(tokenClassNames) {
		return tokenClassNames[c]
	}
	return ""
}

// ParseTokenClass maps a class's name to it.
func ParseTokenClass(s string) (TokenClass, bool) {
	for c, name := range tokenClassNames {
		if name != "" && name == s {
			return TokenClass(c), true
		}
	}
	return 0, false
}

// isSpace is the whitespace of runs and lines: tab, newline, form feed,
// carriage return and space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isUpper(c) || ('a' <= c && c <= 'z') }
func isKeyChar(c byte) bool {
	return isAlnum(c) || c == '_' || c == '.' || c == '-'
}

// textTokens calls fn for each token of s of the classes compared as
// they are (line, pair value, run) of at least minLen bytes and other
// than s itself, in this order: for each line (split at '\n'), the line
// (when s has several), the line's "key: value" value, then for each
// run of the line, the run and its "key=value" value.
func textTokens(s string, minLen int, fn func(TokenClass, string)) {
	emit := func(c TokenClass, t string) {
		if len(t) >= minLen && t != s {
			fn(c, t)
		}
	}
	multi := strings.IndexByte(s, '\n') >= 0
	for rest := s; ; {
		line, after, more := strings.Cut(rest, "\n")
		line = trimSpace(line)
		if multi {
			emit(TokenLine, line)
		}
		// "key: value": the key a letter then letters, digits, spaces,
		// '_', '.' or '-', up to the line's first ':', which a space or
		// tab follows.
		if i := strings.IndexByte(line, ':'); i > 0 && i+1 < len(line) && (line[i+1] == ' ' || line[i+1] == '\t') && isAlpha(line[0]) {
			key := true
			for j := 1; j < i; j++ {
				if !isKeyChar(line[j]) && line[j] != ' ' {
					key = false
					break
				}
			}
			if key {
				emit(TokenPairValue, trimSpace(line[i+1:]))
			}
		}
		for r := line; r != ""; {
			i := 0
			for i < len(r) && isSpace(r[i]) {
				i++
			}
			j := i
			for j < len(r) && !isSpace(r[j]) {
				j++
			}
			if j > i {
				run := r[i:j]
				emit(TokenRun, run)
				// "key=value": the run's first '=', after one or more of
				// letters, digits, '_', '.' and '-'; the value without the
				// quotes around it.
				if k := strings.IndexByte(run, '='); k > 0 && keyOnly(run[:k]) {
					emit(TokenPairValue, strings.Trim(run[k+1:], `"'`))
				}
			}
			r = r[j:]
		}
		if !more {
			return
		}
		rest = after
	}
}

func isAlpha(c byte) bool { return isUpper(c) || ('a' <= c && c <= 'z') }

func keyOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isKeyChar(s[i]) {
			return false
		}
	}
	return true
}

// identTokens calls fn for each identifier in s (email, URL, IBAN, digit
// run) of at least minLen bytes once normalised, with its normalised
// form, scanning s left to right: emails at each '@', then URLs, IBANs
// and digit runs each from left to right, a token's end the next start.
func identTokens(s string, minLen int, fn func(TokenClass, string)) {
	identSpans(s, minLen, func(c TokenClass, t string, _, _ int) { fn(c, t) })
}

// identSpans is identTokens that also gives each identifier's bytes in
// s, s[i:e].
func identSpans(s string, minLen int, fn func(c TokenClass, t string, i, e int)) {
	emit := func(c TokenClass, t string, i, e int) {
		if len(t) >= minLen {
			fn(c, t, i, e)
		}
	}
	for at := 0; ; {
		i := strings.IndexByte(s[at:], '@')
		if i < 0 {
			break
		}
		i += at
		at = i + 1
		l := i
		for l > 0 && (isAlnum(s[l-1]) || strings.IndexByte("._%+-", s[l-1]) >= 0) {
			l--
		}
		for l < i && s[l] == '.' {
			l++
		}
		r := i + 1
		for r < len(s) && (isAlnum(s[r]) || s[r] == '.' || s[r] == '-') {
			r++
		}
		for r > i+1 && (s[r-1] == '.' || s[r-1] == '-') {
			r--
		}
		dom := s[i+1 : r]
		if l < i && dom != "" && dom[0] != '.' && strings.IndexByte(dom, '.') > 0 {
			emit(TokenEmail, strings.ToLower(s[l:r]), l, r)
		}
	}
	for i := 0; i < len(s); {
		if s[i] != 'h' && s[i] != 'H' || (i > 0 && isAlnum(s[i-1])) {
			i++
			continue
		}
		n := 0
		if hasPrefixFold(s[i:], "https://") {
			n = 8
		} else if hasPrefixFold(s[i:], "http://") {
			n = 7
		} else {
			i++
			continue
		}
		e := i + n
		for e < len(s) && !isSpace(s[e]) && strings.IndexByte("\"'<>`", s[e]) < 0 {
			e++
		}
		for e > i+n && strings.IndexByte(".,;:!?)]}", s[e-1]) >= 0 {
			e--
		}
		if e > i+n {
			u := s[i:e]
			h := n + strings.IndexAny(u[n:], "/?#")
			if h < n {
				h = len(u)
			}
			emit(TokenURL, asciiLower(u[:h])+u[h:], i, e)
		}
		i = e
	}
	for i := 0; i+4 <= len(s); {
		if (i > 0 && isAlnum(s[i-1])) || !isUpper(s[i]) || !isUpper(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
			i++
			continue
		}
		e, norm := ibanAt(s, i)
		if e < 0 {
			i++
			continue
		}
		emit(TokenIBAN, norm, i, e)
		i = e
	}
	for i := 0; i < len(s); {
		if !isDigit(s[i]) || (i > 0 && isDigit(s[i-1])) {
			i++
			continue
		}
		e := i
		var b []byte
		for {
			for e < len(s) && isDigit(s[e]) {
				b = append(b, s[e])
				e++
			}
			if e+1 < len(s) && (s[e] == ' ' || s[e] == '-') && isDigit(s[e+1]) {
				e++
				continue
			}
			break
		}
		if !isDate(s[i:e]) {
			emit(TokenDigits, string(b), i, e)
		}
		i = e
	}
}

// ibanAt reads an IBAN starting at s[i] (two capitals and two digits
// there) and returns its end and its form without separators, or -1.
func ibanAt(s string, i int) (int, string) {
	run := func(j int) int {
		for j < len(s) && (isUpper(s[j]) || isDigit(s[j])) {
			j++
		}
		return j
	}
	e := run(i)
	norm := s[i:e]
	if e-i == 4 {
		// Groups of four: a separator, then one to four, while the group
		// before had four.
		var b []byte
		b = append(b, s[i:e]...)
		for last := 4; last == 4 && e+1 < len(s) && (s[e] == ' ' || s[e] == '-'); {
			g := run(e + 1)
			if g-(e+1) < 1 || g-(e+1) > 4 {
				break
			}
			b = append(b, s[e+1:g]...)
			last = g - (e + 1)
			e = g
		}
		norm = string(b)
	}
	if len(norm) < 15 || len(norm) > 34 || (e < len(s) && isAlnum(s[e])) {
		return -1, ""
	}
	return e, norm
}

// isDate reports whether a digit run starts with a date: four digits,
// '-', two digits, '-', two digits.
func isDate(s string) bool {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for _, k := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if !isDigit(s[k]) {
			return false
		}
	}
	return true
}

// asciiLower is s with its ASCII capitals lower-cased, nothing else: a
// URL's host is compared so. Lower-casing rune by rune (unicode.ToLower)
// makes the capital I with a dot (U+0130) an "i", where IDNA reads it as
// "i̇", another host.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if isUpper(s[i]) {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if isUpper(b[j]) {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func hasPrefixFold(s, p string) bool { return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) }
