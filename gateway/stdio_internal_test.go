package gateway

import (
	"io"
	"strings"
	"testing"
)

func TestGuardedLines(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		name, in, out, err string
	}{
		{"passes messages", msg + "\n" + msg + "\n", msg + "\n" + msg + "\n", ""},
		{"last line without newline", msg, msg, ""},
		{"batch", msg + "\n[" + msg + "]\n" + msg + "\n", msg + "\n", "batched"},
		{"a lone array", "[\n", "", "batched"},
		{"deep object", `{"a":` + strings.Repeat(`{"a":`, 300) + "1" + strings.Repeat("}", 301) + "\n", "", "not acceptable JSON"},
		{"too long", `{"a":"` + strings.Repeat("x", 3000) + `"}` + "\n", "", "longer than"},
		{"trailing data", msg + " 1\n", "", "after its JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuardedLines(io.NopCloser(strings.NewReader(tc.in)), 2048, 200)
			got, err := io.ReadAll(g)
			if string(got) != tc.out {
				t.Errorf("passed %q, want %q", got, tc.out)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("err %v, want %q", err, tc.err)
			}
		})
	}
}
