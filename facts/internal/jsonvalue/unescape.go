package jsonvalue

import (
	"bytes"
	"unicode/utf8"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// AppendUnescaped appends b to dst with every JSON string escape in b
// decoded once, as a JSON string's would be: b is any bytes (not a
// quoted string; a '"' is copied as it is), and what an escape decodes to
// is not read again (an escaped backslash gives a backslash). It returns
// false when b holds an invalid escape or a lone UTF-16 surrogate escape,
// which no JSON string holds; dst then holds part of b only and is not to
// be read. The flow filter (facts' flowFilter.pass) reads a return's
// content through it.
func AppendUnescaped(dst, b []byte) ([]byte, bool) {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 {
			return append(dst, b...), true
		}
		dst = append(dst, b[:i]...)
		b = b[i:]
		if len(b) < 2 {
			return dst, false
		}
		switch c := b[1]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := wire.Hex4(b[2:])
			if !ok {
				return dst, false
			}
			if 0xd800 <= r && r < 0xe000 {
				r2, ok := rune(0), false
				if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
					r2, ok = wire.Hex4(b[8:])
				}
				if !ok || r >= 0xdc00 || r2 < 0xdc00 || r2 >= 0xe000 {
					return dst, false
				}
				dst = utf8.AppendRune(dst, (r-0xd800)<<10|(r2-0xdc00)+0x10000)
				b = b[12:]
				continue
			}
			dst = utf8.AppendRune(dst, r)
			b = b[6:]
			continue
		default:
			return dst, false
		}
		b = b[2:]
	}
}
