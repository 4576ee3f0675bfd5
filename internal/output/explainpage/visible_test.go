package explainpage_test

import (
	"testing"

	"github.com/policycheck/policycheck/internal/output/explainpage"
)

func TestVisible(t *testing.T) {
	for _, tc := range []struct {
		in        string
		keepLines bool
		want      string
	}{
		{"plain <b> & text", false, "plain <b> & text"}, // markup is html/template's to escape
		{"a\x1b[31mb", false, `a\u001b[31mb`},
		{"nul\x00bell\x07del\x7f", false, `nul\u0000bell\u0007del\u007f`},
		{"c1\u0085", false, `c1\u0085`},
		{"line\nnext\ttab", false, `line\u000anext\u0009tab`},
		{"line\nnext\ttab", true, "line\nnext\ttab"},
		{"rtl\u202etxt\u2066iso\u2069\u200e\u200f\u061c", false, `rtl\u202etxt\u2066iso\u2069\u200e\u200f\u061c`},
		{"sep\u2028\u2029", true, `sep\u2028\u2029`},
		{"bad\xffutf8", false, `bad\ufffdutf8`},
		{"naïve café €", false, "naïve café €"},
	} {
		if got := explainpage.Visible(tc.in, tc.keepLines); got != tc.want {
			t.Errorf("Visible(%q, %v) = %q, want %q", tc.in, tc.keepLines, got, tc.want)
		}
	}
}
