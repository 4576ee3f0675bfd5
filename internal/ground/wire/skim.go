package wire

import "bytes"

// The structural readers: they follow strings and nesting only, for bytes
// that the Scanner has read strictly already (a value a MarshalJSON
// wrote, a history the decoder accepted) or will read strictly next (the
// elements of a request's history, which the decoder then decodes).
// They check nothing else: every byte of input is checked, once, by the
// Scanner.

// SkipSpace returns the offset of the first byte of b from i on that is
// not JSON whitespace (see IsSpace); len(b) when there is none.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// FollowsObject reports whether b[c] follows "}," with only whitespace
// between: where one message of a history array may end and the next
// begin (a guess, which the decoder confirms).
func FollowsObject(b []byte, c int) bool {
	i := c - 1
	for i >= 0 && IsSpace(b[i]) {
		i--
	}
	if i < 0 || b[i] != ',' {
		return false
	}
	i--
	for i >= 0 && IsSpace(b[i]) {
		i--
	}
	return i >= 0 && b[i] == '}'
}

// StringEnd returns the offset of the quote that closes the JSON string
// whose opening quote is b[i], reading only quotes and the backslashes
// before them. When the string is not closed, ok is false and end is the
// offset of the last quote read (escaped, or the opening one).
func StringEnd(b []byte, i int) (end int, ok bool) {
	for {
		j := bytes.IndexByte(b[i+1:], '"')
		if j < 0 {
			return i, false
		}
		i += j + 1
		bs := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return i, true
		}
	}
}

// Skim returns the offset just past the array or object that begins at
// b[i], following only its strings (StringEnd) and its nesting, at most
// maxDepth levels. On a fault it returns the offset where it stopped and
// what it found there: "unterminated string", "nested too deeply" or
// "unexpected end of input".
func Skim(b []byte, i, maxDepth int) (end int, fault string) {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			j, ok := StringEnd(b, i)
			if !ok {
				return j, "unterminated string"
			}
			i = j + 1
		case '{', '[':
			if depth++; depth > maxDepth {
				return i, "nested too deeply"
			}
			i++
		case '}', ']':
			i++
			if depth--; depth == 0 {
				return i, ""
			}
		default:
			i++
		}
	}
	return i, "unexpected end of input"
}
