package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/cli"
)

// fakeRoot writes files (paths relative to /) under a new directory that
// stands for / and returns it.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Mount tables: a cgroup v2 host (/sys/fs/cgroup), and a hybrid one whose
// memory controller is on a v1 hierarchy, as systemd lays them out.
const (
	mountsV2 = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	mountsHybrid = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n" +
		"31 22 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	procHybrid = "5:pids:/\n4:memory:/ci/job7\n2:cpu,cpuacct:/\n0::/\n"
	// v1Unlimited is what memory.limit_in_bytes reads with no limit set
	// (the largest int64 rounded down to a 4 KiB page).
	v1Unlimited = "9223372036854771712\n"
)

// TestGatewayMemoryLimitAuto: --memory-limit auto sets the collector's
// soft limit to 90% of the smallest cgroup memory limit over the
// process's cgroup and its ancestors (rounded down to a MiB), under cgroup
// v2 or v1, found through /proc/self/cgroup and /proc/self/mountinfo, and
// says which file it came from.
func TestGatewayMemoryLimitAuto(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  uint64 // the soft limit set
		said  string
	}{{
		name: "v2 limit at the leaf",
		files: map[string]string{
			"proc/self/cgroup":                           "0::/kubepods/pod1/ctr\n",
			"proc/self/mountinfo":                        mountsV2,
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "536870912\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":     "max\n",
			"sys/fs/cgroup/kubepods/memory.max":          "max\n",
		},
		// 512MiB × 0.9 = 460.8MiB.
		want: 460 << 20,
		said: "the garbage collector runs as the heap nears 460MiB, 90% of the cgroup memory limit 512MiB in /sys/fs/cgroup/kubepods/pod1/ctr/memory.max (--memory-limit auto)",
	}, {
		// Mounted elsewhere than /sys/fs/cgroup, where a stale tree
		// must not be read.
		name: "v2 smaller limit at an ancestor",
		files: map[string]string{
			"proc/self/cgroup": "0::/system.slice/gw.service\n",
			"proc/self/mountinfo": "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n" +
				"40 22 0:40 / /run/cg\\0402 rw,relatime - cgroup2 none rw\n",
			"run/cg 2/system.slice/gw.service/memory.max":      "2147483648\n",
			"run/cg 2/system.slice/memory.max":                 "1073741824\n",
			"sys/fs/cgroup/system.slice/gw.service/memory.max": "104857600\n",
		},
		// 1GiB × 0.9 = 921.6MiB.
		want: 921 << 20,
		said: "the garbage collector runs as the heap nears 921MiB, 90% of the cgroup memory limit 1GiB in /run/cg 2/system.slice/memory.max (--memory-limit auto)",
	}, {
		// memory.high, where the kernel throttles the cgroup, below
		// memory.max (Kubernetes' memory QoS, systemd's MemoryHigh=).
		name: "v2 throttling limit below the hard one",
		files: map[string]string{
			"proc/self/cgroup":                            "0::/kubepods/pod1/ctr\n",
			"proc/self/mountinfo":                         mountsV2,
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max":  "1073741824\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.high": "838860800\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":      "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.high":     "max\n",
		},
		// 800MiB × 0.9 = 720MiB.
		want: 720 << 20,
		said: "the garbage collector runs as the heap nears 720MiB, 90% of the cgroup memory limit 800MiB in /sys/fs/cgroup/kubepods/pod1/ctr/memory.high (--memory-limit auto)",
	}, {
		name: "v1 limit",
		files: map[string]string{
			"proc/self/cgroup":    procHybrid,
			"proc/self/mountinfo": mountsHybrid,
			"sys/fs/cgroup/memory/ci/job7/memory.limit_in_bytes": "805306368\n",
			"sys/fs/cgroup/memory/ci/memory.limit_in_bytes":      v1Unlimited,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":         v1Unlimited,
			// The v2 hierarchy holds no memory controller here.
			"sys/fs/cgroup/unified/memory.max": "104857600\n",
		},
		// 768MiB × 0.9 = 691.2MiB.
		want: 691 << 20,
		said: "the garbage collector runs as the heap nears 691MiB, 90% of the cgroup memory limit 768MiB in /sys/fs/cgroup/memory/ci/job7/memory.limit_in_bytes (--memory-limit auto)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeRoot(t, tc.files)
			said, pct, lim := serveCollector(t, cli.WithCgroupRoot(context.Background(), root), "--memory-limit", "auto")
			if want := strings.ReplaceAll(tc.said, " in /", " in "+root+"/"); !strings.Contains(said, want) {
				t.Errorf("stderr %q; want %q", said, want)
			}
			if pct != gcOff || lim != tc.want {
				t.Errorf("while serving: GOGC %d%%, limit %d; want off and %d", pct, lim, tc.want)
			}
		})
	}
}

// TestGatewayMemoryLimitAutoRefused: --memory-limit auto with no cgroup
// memory limit to go by (none set, no cgroup files, a file it cannot
// parse) or with one that leaves less than 64MiB is refused before
// anything starts (exit 2), naming the files it read and what it found;
// so is the environment's GOGC beside it.
func TestGatewayMemoryLimitAutoRefused(t *testing.T) {
	reg := writeFile(t, t.TempDir(), "tools.yaml", "tools:\n  - name: read_file\n    upstream: files\n")
	const suggest = "; give --memory-limit a SIZE instead, such as 512MiB, under the memory the process may use"
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   string // GOGC
		want  string
	}{{
		name: "v2 max everywhere",
		files: map[string]string{
			"proc/self/cgroup":                        "0::/user.slice/u1\n",
			"proc/self/mountinfo":                     mountsV2,
			"sys/fs/cgroup/user.slice/u1/memory.max":  "max\n",
			"sys/fs/cgroup/user.slice/u1/memory.high": "max\n",
			"sys/fs/cgroup/user.slice/memory.max":     "max\n",
			"sys/fs/cgroup/user.slice/memory.high":    "max\n",
		},
		want: "--memory-limit auto: no cgroup memory limit found: " +
			"/sys/fs/cgroup/user.slice/u1/memory.max: max (no limit), " +
			"/sys/fs/cgroup/user.slice/u1/memory.high: max (no limit), " +
			"/sys/fs/cgroup/user.slice/memory.max: max (no limit), " +
			"/sys/fs/cgroup/user.slice/memory.high: max (no limit), " +
			"/sys/fs/cgroup/memory.max: absent, /sys/fs/cgroup/memory.high: absent" + suggest,
	}, {
		name: "v1 unlimited",
		files: map[string]string{
			"proc/self/cgroup":    procHybrid,
			"proc/self/mountinfo": mountsHybrid,
			"sys/fs/cgroup/memory/ci/job7/memory.limit_in_bytes": v1Unlimited,
			"sys/fs/cgroup/memory/ci/memory.limit_in_bytes":      v1Unlimited,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":         v1Unlimited,
			"sys/fs/cgroup/unified/memory.max":                   "104857600\n",
		},
		want: "--memory-limit auto: no cgroup memory limit found: " +
			"/sys/fs/cgroup/memory/ci/job7/memory.limit_in_bytes: 9223372036854771712 (no limit), " +
			"/sys/fs/cgroup/memory/ci/memory.limit_in_bytes: 9223372036854771712 (no limit), " +
			"/sys/fs/cgroup/memory/memory.limit_in_bytes: 9223372036854771712 (no limit)" + suggest,
	}, {
		name:  "no cgroup files",
		files: map[string]string{},
		want:  "--memory-limit auto: no cgroup memory limit found: open /proc/self/cgroup: no such file or directory" + suggest,
	}, {
		name: "no cgroup mount",
		files: map[string]string{
			"proc/self/cgroup":    "0::/a\n",
			"proc/self/mountinfo": "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n",
		},
		want: "--memory-limit auto: no cgroup memory limit found: /proc/self/mountinfo has no cgroup2 mount holding the process's cgroup /a (/proc/self/cgroup)" + suggest,
	}, {
		name: "malformed value",
		files: map[string]string{
			"proc/self/cgroup":           "0::/a\n",
			"proc/self/mountinfo":        mountsV2,
			"sys/fs/cgroup/a/memory.max": "1G\n",
		},
		want: `--memory-limit auto: /sys/fs/cgroup/a/memory.max: "1G": want max or a number of bytes` + suggest,
	}, {
		name: "under 64MiB",
		files: map[string]string{
			"proc/self/cgroup":           "0::/a\n",
			"proc/self/mountinfo":        mountsV2,
			"sys/fs/cgroup/a/memory.max": "67108864\n",
		},
		want: "--memory-limit auto: 90% of the cgroup memory limit 64MiB (/sys/fs/cgroup/a/memory.max) is 57MiB, under the 64MiB minimum: leave --memory-limit unset, or give the process more memory",
	}, {
		name: "GOGC",
		files: map[string]string{
			"proc/self/cgroup":           "0::/a\n",
			"proc/self/mountinfo":        mountsV2,
			"sys/fs/cgroup/a/memory.max": "1073741824\n",
		},
		env:  "200",
		want: "--memory-limit and the environment's GOGC=200 both set the garbage collector: unset one",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeRoot(t, tc.files)
			t.Setenv("GOGC", tc.env)
			t.Setenv("GOMEMLIMIT", "")
			var stderr bytes.Buffer
			// Were auto not refused, the gateway would stop at --addr
			// (exit 2 with another message), not serve.
			code := cli.RunContext(cli.WithCgroupRoot(context.Background(), root),
				[]string{"gateway", "--registry", reg, "--upstream", "files=true", "--start-timeout", "1ms", "--addr", "no-port", "--memory-limit", "auto"},
				strings.NewReader(""), &bytes.Buffer{}, &stderr)
			got := strings.ReplaceAll(stderr.String(), root, "")
			if code != cli.ExitBadUsage || !strings.Contains(got, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, got, tc.want)
			}
		})
	}
}
