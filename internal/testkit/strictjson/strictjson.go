// Package strictjson is a test oracle for wire.Skip (internal/ground/wire), written
// independently of it: what encoding/json accepts, less what it reads as
// something else (invalid UTF-8 and lone UTF-16 surrogate escapes, both
// read as U+FFFD), and the nesting depth of a valid document. It is a
// test helper, not an API promise.
package strictjson

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Valid reports whether data is one JSON value (whitespace around it
// allowed) that encoding/json accepts and that is strict JSON text as
// well: UTF-8, with every UTF-16 surrogate escape in a pair, a leading one
// followed by the escape of a trailing one.
func Valid(data []byte) bool {
	if !json.Valid(data) || !utf8.Valid(data) {
		return false
	}
	hex := func(i int) rune {
		r, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(r)
	}
	// In valid JSON a backslash stands only in a string, so the escapes
	// are found by reading the bytes in order.
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if data[i+1] != 'u' {
			i++
			continue
		}
		switch r := hex(i + 2); {
		case 0xdc00 <= r && r < 0xe000:
			return false
		case 0xd800 <= r && r < 0xdc00:
			if i+12 > len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
				return false
			}
			if r2 := hex(i + 8); r2 < 0xdc00 || r2 >= 0xe000 {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}

// Depth is the nesting of data, a valid JSON document, as the reference's
// parser (jiter) counts it against its limit: the most arrays and objects
// any one value in data lies inside. 0 for a scalar, [] or {}; 1 for [1]
// or [[]]: an empty array or object adds nothing until it holds a value.
func Depth(data []byte) int {
	depth, deepest := 0, 0
	in := false // inside a string
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case in && c == '\\':
			i++
		case in && c == '"':
			in = false
		case in:
		case c == ']' || c == '}':
			depth--
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default: // in a value, a member name or a separator between two: inside depth containers
			deepest = max(deepest, depth)
			switch c {
			case '"':
				in = true
			case '[', '{':
				depth++
			}
		}
	}
	return deepest
}
