package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// headlessChromium returns the path of a Chromium binary, skipping the
// test outside CI when there is none (scripts/test.sh installs Debian's
// chromium under CI=true).
func headlessChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but no chromium is installed: scripts/test.sh installs Debian's chromium package")
	}
	t.Skip("no headless Chromium (apt-get install -y chromium): the HTML page is not checked in a browser")
	return ""
}

// cspScriptNone is how a page that runs no script says so in its
// Content-Security-Policy.
const cspScriptNone = "script-src 'none'"

// checkInChromium loads a copy of page with check appended (a <script>
// element that reads the rendered page and writes what it found as JSON
// into <pre id="page-check">) in headless Chromium, and decodes that JSON
// into got. A page whose Content-Security-Policy forbids scripts gets the
// check, and only the check, allowed by its hash: any other script, such
// as one smuggled in by an input string, stays blocked. It returns the
// time Chromium took, for the measurements (never asserted). flags are
// added to Chromium's (--window-size=W,H, say).
func checkInChromium(t *testing.T, browser, page, check string, got any, flags ...string) time.Duration {
	t.Helper()
	if strings.Contains(page, cspScriptNone) {
		body := strings.TrimSuffix(strings.TrimPrefix(check, "<script>"), "</script>")
		sum := sha256.Sum256([]byte(body))
		page = strings.Replace(page, cspScriptNone, "script-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'", 1)
	}
	tmp := t.TempDir()
	file := filepath.Join(tmp, "page.html")
	checked := strings.Replace(page, "</body>", check+"</body>", 1)
	if err := os.WriteFile(file, []byte(checked), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+filepath.Join(tmp, "profile"),
		"--dump-dom", "file://"+file)
	cmd.Args = append(cmd.Args[:len(cmd.Args)-2], append(flags, cmd.Args[len(cmd.Args)-2:]...)...)
	start := time.Now()
	dom, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`<pre id="page-check">(.*?)</pre>`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's check did not run; DOM:\n%.4000s", dom)
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), got); err != nil {
		t.Fatalf("%v: %s", err, m[1])
	}
	return took
}
