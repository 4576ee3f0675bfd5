package server_test

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

var (
	memoryFlag    = flag.Bool("memory", false, "run TestPeakMemory: four concurrent 60 MB histories against a `policycheck serve` process, peak and after RSS")
	memoryContext = flag.Bool("memory-context", false, "TestPeakMemory also sends four 60 MB contexts with --max-context-bytes 0 (minutes, and gigabytes)")
)

// procKB reads a field (VmHWM, VmRSS) of /proc/pid/status, in kB.
func procKB(t *testing.T, pid int, field string) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, field+":") {
			n, err := strconv.Atoi(strings.Fields(line)[1])
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("%s not in /proc/%d/status", field, pid)
	return 0
}

// TestPeakMemory serves with the policycheck binary in its own process
// and sends four 60 MB requests at once, twice: histories of ~55,000
// messages, then a short history with a 60 MB context. It prints the
// server's peak RSS (VmHWM) and its RSS once the requests are answered
// and again 30 s later. go test -run TestPeakMemory -v ./server -args -memory
func TestPeakMemory(t *testing.T) {
	if !*memoryFlag {
		t.Skip("the memory measurement runs with -memory")
	}
	dir := t.TempDir()
	bin := servetest.Build(t)

	o := gen.Default(55_000)
	o.Tools = 100
	regFile := filepath.Join(dir, "registry.json")
	require.NoError(t, os.WriteFile(regFile, gen.Registry(1, o), 0o600))
	base := gen.History(1, o)
	bigCtx := func(j int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"user":"u` + strconv.Itoa(j) + `","notes":[`)
		for i := 0; b.Len() < 60_000_000; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"i":%d,"text":"some context string of moderate length %d"}`, i, j)
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
	shapes := []struct {
		name    string
		context bool
		body    func(j int) []byte
	}{
		{"60 MB history", false, func(j int) []byte {
			return append(append([]byte(`{"history":`), variant(base, j)...), '}')
		}},
		{"60 MB context, --max-context-bytes 0", true, func(j int) []byte {
			return append(append([]byte(`{"history":[],"context":`), bigCtx(j)...), '}')
		}},
	}
	if !*memoryContext {
		shapes = shapes[:1]
	}
	for _, shape := range shapes {
		args := []string{"--registry", regFile, "--timeout", "60s"}
		if shape.context {
			// Past the default --max-context-bytes (1 MiB) the server
			// refuses it (413) before converting it.
			args = append(args, "--max-context-bytes", "0")
		}
		srv := servetest.Start(t, bin, args...)
		client := &http.Client{Timeout: 10 * time.Minute}
		idle := procKB(t, srv.PID, "VmRSS")
		bodies := make([][]byte, 4)
		for j := range bodies {
			bodies[j] = shape.body(j)
		}
		var wg sync.WaitGroup
		statuses := make([]int, len(bodies))
		for j := range bodies {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				resp, err := client.Post(srv.URL+"/v1/decide", "application/json", bytes.NewReader(bodies[j]))
				if err == nil {
					statuses[j] = resp.StatusCode
					resp.Body.Close()
				}
			}(j)
		}
		wg.Wait()
		peak := procKB(t, srv.PID, "VmHWM")
		after := procKB(t, srv.PID, "VmRSS")
		time.Sleep(30 * time.Second)
		later := procKB(t, srv.PID, "VmRSS")
		srv.Stop()
		client.CloseIdleConnections()
		line := fmt.Sprintf("%s: 4 concurrent requests of %.1f MB (statuses %v): idle RSS %d MB, peak RSS %d MB, RSS after %d MB, 30 s later %d MB",
			shape.name, float64(len(bodies[0]))/1e6, statuses, idle/1024, peak/1024, after/1024, later/1024)
		t.Log(line)
		fmt.Println(line)
		require.Equal(t, []int{200, 200, 200, 200}, statuses)
	}
}
