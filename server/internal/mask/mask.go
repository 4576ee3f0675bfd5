// Package mask removes values from a JSON document by JSON pointer
// (RFC 6901): the sidecar (server/) masks a request's context with it
// before the context goes into a decision log. It knows nothing of
// decisions or logs.
package mask

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Context returns a copy of the context without the values at the
// given JSON pointers (relative to the context).
func Context(ctxDoc any, pointers []string) any {
	if ctxDoc == nil || slices.Contains(pointers, "") {
		return map[string]any{}
	}
	if raw, ok := ctxDoc.(json.RawMessage); ok {
		// A request's context arrives as its bytes: decoded here, for
		// the log only, into a value of the log's own.
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return map[string]any{}
		}
		for _, p := range pointers {
			removePointer(v, p)
		}
		return v
	}
	if len(pointers) == 0 {
		return ctxDoc
	}
	out := deepCopy(ctxDoc)
	for _, p := range pointers {
		removePointer(out, p)
	}
	return out
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// CheckPointer refuses a mask that is not a JSON pointer (RFC 6901): a
// mask that matched nothing would log what it was meant to hide.
func CheckPointer(ptr string) error {
	if ptr != "" && ptr[0] != '/' {
		return errors.New("a JSON pointer is empty (the whole context) or begins with '/'")
	}
	for i := 0; i < len(ptr); i++ {
		if ptr[i] == '~' && (i+1 == len(ptr) || (ptr[i+1] != '0' && ptr[i+1] != '1')) {
			return errors.New("'~' in a JSON pointer is '~0' or '~1'")
		}
	}
	return nil
}

// removePointer removes the value at ptr (checked by CheckPointer) from
// doc; the whole context is masked by Context.
func removePointer(doc any, ptr string) {
	if ptr == "" {
		return
	}
	toks := strings.Split(ptr[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	cur := doc
	for i, t := range toks {
		last := i == len(toks)-1
		switch x := cur.(type) {
		case map[string]any:
			if last {
				delete(x, t)
				return
			}
			cur = x[t]
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(x) {
				return
			}
			if last {
				x[n] = nil
				return
			}
			cur = x[n]
		default:
			return
		}
	}
}
