// Package limitstest gives the decode limits a test of a history decoder
// crosses by one: each of the message, part and byte limits set one below
// what a history needs, so that the decoder under test must stop at
// exactly the place the reference decoder stops. It is a test helper, not
// an API promise.
package limitstest

import (
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// OneShort returns plenty, then, for a history h of more than two messages
// whose JSON array is n bytes long, plenty with each limit in turn set one
// below what h needs: parts, then messages, then bytes. For a shorter
// history it returns plenty alone, and a history of one part has no part
// limit below it (0 is no limit).
func OneShort(plenty loader.Limits, h facts.History, n int) []loader.Limits {
	out := []loader.Limits{plenty}
	if len(h) <= 2 {
		return out
	}
	parts := 0
	for i := range h {
		parts += len(h[i].Parts)
	}
	if parts > 1 {
		l := plenty
		l.MaxParts = parts - 1
		out = append(out, l)
	}
	l := plenty
	l.MaxMessages = len(h) - 1
	out = append(out, l)
	l = plenty
	l.MaxBytes = int64(n - 1)
	return append(out, l)
}
