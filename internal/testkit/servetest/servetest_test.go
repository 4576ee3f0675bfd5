package servetest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestStartServesAndStops: the built command serves /health on the URL
// Start returns, its CPU time is readable, and Stop ends it.
func TestStartServesAndStops(t *testing.T) {
	p := servetest.Start(t, servetest.Build(t))
	resp, err := http.Get(p.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && servetest.CPU(p.PID) <= 0 {
		t.Errorf("no CPU time read for pid %d", p.PID)
	}
	p.Stop()
	if _, err := http.Get(p.URL + "/health"); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	p.Stop() // a second Stop does nothing
}

// TestFloorReadsTheBodyAndAnswersTheAskedSize: the floor reads bodies of
// any size, answers with a JSON object of the size asked for, and refuses
// a size it cannot make or a query parameter it does not read.
func TestFloorReadsTheBodyAndAnswersTheAskedSize(t *testing.T) {
	p := servetest.StartFloor(t, servetest.BuildFloor(t))
	client := &http.Client{}
	defer client.CloseIdleConnections()
	post := func(query string, body []byte) (int, []byte) {
		t.Helper()
		resp, err := client.Post(p.URL+"/"+query, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out
	}
	big := bytes.Repeat([]byte("x"), 3<<20)
	for _, c := range []struct {
		query string
		body  []byte
		size  int
	}{{"", []byte(`{}`), 16}, {"?reply=1000", big, 1000}, {"?reply=16", nil, 16}, {"?reply=70000", big[:5000], 70000}} {
		code, out := post(c.query, c.body)
		var v map[string]string
		if code != http.StatusOK || len(out) != c.size || json.Unmarshal(out, &v) != nil {
			t.Errorf("%s with %d bytes: %d, %d bytes %.40q; want 200 and a JSON object of %d bytes", c.query, len(c.body), code, len(out), out, c.size)
		}
	}
	if code, _ := post("?reply=15", nil); code != http.StatusBadRequest {
		t.Errorf("reply=15: %d, want 400", code)
	}
	for _, q := range []string{"?reply=x", "?reply=67108865", "?replies=1000", "?reply=1000&size=5"} {
		if code, _ := post(q, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
	p.Stop()
	if _, err := http.Get(p.URL + "/"); err == nil {
		t.Fatal("the floor still answers after Stop")
	}
}

// TestStartReportsAServerThatDoesNotStart: a serve that refuses its flags
// fails the test at once with what it said, not after a minute's wait.
func TestStartReportsAServerThatDoesNotStart(t *testing.T) {
	bin := servetest.Build(t)
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		servetest.Start(ft, bin, "--timeout", "0s")
	}()
	<-done
	if !ft.failed || !strings.Contains(ft.msg, "--timeout") {
		t.Fatalf("Start did not report the refusal: failed=%v %q", ft.failed, ft.msg)
	}
}

// fakeT records a fatal failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeT) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
