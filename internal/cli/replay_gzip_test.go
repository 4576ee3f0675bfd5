package cli_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// gzipMember is data as one gzip member.
func gzipMember(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gzipBomb is a gzip file, small on disk, that inflates to head, then
// mib MiB of fill, then tail: one member of a MiB of fill, compressed
// once and repeated (gzip readers read members in a row as one stream).
func gzipBomb(t *testing.T, head string, fill byte, mib int, tail string) []byte {
	t.Helper()
	out := gzipMember(t, []byte(head))
	mb := gzipMember(t, bytes.Repeat([]byte{fill}, 1<<20))
	for range mib {
		out = append(out, mb...)
	}
	return append(out, gzipMember(t, []byte(tail))...)
}

// TestReplayRefusesGzipBombs: replay reads a gzip input as it inflates,
// --max-bytes bounding each JSON Lines line and each document: a small
// file that would inflate to 64 MiB is refused (exit 2, naming the file
// and line) having allocated a small multiple of the limit, not what it
// inflates to. Inputs under the limit, gzip or not, are replayed.
func TestReplayRefusesGzipBombs(t *testing.T) {
	const limit = 1 << 20
	reg := filepath.Join(examplesDir, "registry.yaml")
	pols := filepath.Join(examplesDir, "policies")
	history, err := os.ReadFile(filepath.Join(examplesDir, "histories", "refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	var line bytes.Buffer
	if err := json.Compact(&line, history); err != nil {
		t.Fatal(err)
	}
	good := line.String()
	event := `{"decision_id": "d1", "path": "policycheck/availability/decision", "input": {"x": "`
	for _, c := range []struct {
		name, data, want string
	}{
		{"line.jsonl.gz", string(gzipBomb(t, event, 'a', 64, `"}}`)), "line.jsonl.gz:1: (root): the line is over the limit of 1048576 bytes (--max-bytes)"},
		{"second.jsonl.gz", string(gzipBomb(t, good+"\n"+good+"\n[", ' ', 64, "]\n")), "second.jsonl.gz:3: (root): the line is over the limit of 1048576 bytes"},
		{"doc.json.gz", string(gzipBomb(t, "[\n", '\n', 64, "]")), "doc.json.gz: (root): the document is over the limit of 1048576 bytes (--max-bytes)"},
		{"blank.jsonl.gz", string(gzipBomb(t, "\n", ' ', 64, "\n"+good)), "blank.jsonl.gz:2: (root): the line is over the limit of 1048576 bytes"},
		// Blank lines are not held: 16 MiB of them before a history cost nothing.
		{"blank.json.gz", string(gzipBomb(t, "", '\n', 16, good)), ""},
		{"plain.jsonl", good + "\n" + event + strings.Repeat("a", limit) + `"}}` + "\n", "plain.jsonl:2: (root): the line is over the limit of 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasSuffix(c.name, ".gz") && len(c.data) > 1<<20 {
				t.Fatalf("the bomb is %d bytes on disk", len(c.data))
			}
			dir := t.TempDir()
			writeFile(t, dir, c.name, c.data)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			code, out, errs := runCLI("replay", "--registry", reg, "--baseline", pols, "--candidate", pols, "--max-bytes", "1048576", dir)
			runtime.ReadMemStats(&after)
			if c.want == "" {
				if code != 0 {
					t.Errorf("exit %d, stderr %q", code, errs)
				}
			} else if code != 2 || out != "" || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errs, c.want)
			}
			// 64 MiB inflated; a small multiple of the 1 MiB limit at most
			// (replaying blank.json.gz's one history costs a few MiB more).
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d KiB on disk, %d KiB allocated", len(c.data)>>10, alloc>>10)
			if alloc > 32*limit {
				t.Errorf("allocated %d MiB to refuse it (limit 1 MiB)", alloc>>20)
			}
		})
	}

	// Under the limit: read, gzip or not, as one history or as lines.
	dir := t.TempDir()
	writeFile(t, dir, "one.json.gz", string(gzipMember(t, history)))
	writeFile(t, dir, "lines.jsonl.gz", string(gzipMember(t, []byte(good+"\n\n"+good+"\n"))))
	writeFile(t, dir, "pretty.json", "\n\n"+string(history))
	code, out, errs := runCLI("replay", "--registry", reg, "--baseline", pols, "--candidate", pols, "--max-bytes", "1048576", "--format", "json", dir)
	if code != 0 || !strings.Contains(out, `"runs": 4`) {
		t.Errorf("under the limit: exit %d, stderr %q\n%s", code, errs, out)
	}
	code, _, errs = runCLI("replay", "--registry", reg, "--baseline", pols, "--candidate", pols, "--max-bytes", "-1", dir)
	if code != 2 || !strings.Contains(errs, "--max-bytes must be 0 (no limit) or more") {
		t.Errorf("--max-bytes -1: exit %d, stderr %q", code, errs)
	}
}
