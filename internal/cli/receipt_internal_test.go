package cli

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/trust"
)

// TestKeyWatchRotates is serve --watch on --receipt-key: a key file that
// changed (and is the same at the next look) rotates the signing key, the
// replaced key staying in the key set until its receipts have expired; a
// file that no longer holds a key is logged and the current key keeps
// signing.
func TestKeyWatchRotates(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "key.pem")
	write := func(data []byte, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(receiptcases.PEM(receiptcases.Key(1)), now)
	s, err := trust.NewSigner(receiptcases.Key(1), trust.TTL(receiptcases.TTL), trust.Clock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	first := s.KeyID()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	w := newKeyWatch(path, s)
	var reports []string
	report := func(err error, rotated bool) { reports = append(reports, fmt.Sprint(err != nil, rotated)) }

	write(receiptcases.PEM(receiptcases.Key(2)), now.Add(time.Second))
	w.look(logger, report)
	if s.KeyID() != first {
		t.Fatal("rotated at the first sight of a change: the file may be half-written")
	}
	w.look(logger, report)
	second := s.KeyID()
	if second == first {
		t.Fatalf("not rotated; log: %s", logs.String())
	}
	if n := s.Keys().Len(); n != 2 {
		t.Fatalf("after the rotation the key set holds %d keys, want the new and the replaced one", n)
	}
	if !strings.Contains(logs.String(), "retired_kid="+first) {
		t.Errorf("the rotation is not logged with the retired kid: %s", logs.String())
	}

	write([]byte("not a key"), now.Add(2*time.Second))
	w.look(logger, report)
	w.look(logger, report)
	if s.KeyID() != second {
		t.Fatal("a file that holds no key replaced the signing key")
	}
	if !strings.Contains(logs.String(), "receipt key changed but not reloaded") {
		t.Errorf("the refused key is not logged: %s", logs.String())
	}

	if got := strings.Join(reports, " "); got != "false true true false" {
		t.Errorf("the outcomes reported are %q, want a rotation then a refusal (err, rotated)", got)
	}

	now = now.Add(receiptcases.TTL)
	if n := s.Keys().Len(); n != 1 {
		t.Fatalf("once the replaced key's receipts have expired the key set holds %d keys, want 1", n)
	}
}
