package cli

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseProcCgroup: /proc/self/cgroup's v2 line (0::PATH) and v1
// memory controller line (alone or among others) are found, other
// controllers ignored, and a line not ID:CONTROLLERS:/PATH refused.
func TestParseProcCgroup(t *testing.T) {
	for _, tc := range []struct {
		data string
		want procCgroup
	}{
		{"0::/kubepods/pod1/ctr\n", procCgroup{v2: "/kubepods/pod1/ctr", hasV2: true}},
		{"12:pids:/a\n4:memory:/ci/job7\n1:name=systemd:/x:y\n0::/\n", procCgroup{v1: "/ci/job7", hasV1: true, v2: "/", hasV2: true}},
		{"3:cpu,memory,blkio:/b\n", procCgroup{v1: "/b", hasV1: true}},
		{"2:cpu,cpuacct:/c\n", procCgroup{}},
		{"", procCgroup{}},
	} {
		got, err := parseProcCgroup(tc.data)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.data, got, err, tc.want)
		}
	}
	for _, bad := range []string{"0:/a\n", "4:memory:relative\n", "garbage\n"} {
		if _, err := parseProcCgroup(bad); err == nil || !strings.Contains(err.Error(), "want ID:CONTROLLERS:/PATH") {
			t.Errorf("%q: %v; want refused", bad, err)
		}
	}
}

// TestParseMountinfo: mountinfo lines give their root, mount point
// (octal escapes undone), type and super options, whatever the number of
// optional fields; a line without the separator or its three fields, or a
// bad escape, is refused.
func TestParseMountinfo(t *testing.T) {
	got, err := parseMountinfo("30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 master:1 - cgroup2 cgroup2 rw,nsdelegate\n" +
		"35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"40 22 0:40 /a\\040b /run/cg\\0402\\134x rw - cgroup2 none rw\n")
	want := []mountEntry{
		{root: "/", point: "/sys/fs/cgroup", fstype: "cgroup2", options: []string{"rw", "nsdelegate"}},
		{root: "/docker/abc", point: "/sys/fs/cgroup/memory", fstype: "cgroup", options: []string{"rw", "memory"}},
		{root: "/a b", point: `/run/cg 2\x`, fstype: "cgroup2", options: []string{"rw"}},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{
		"30 23 0:26 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n", // no separator
		"30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2\n",  // no super options
		"30 23 0:26 / /sys/fs/cg\\04 rw - cgroup2 cgroup2 rw\n",
		"30 23 0:26 / /sys/fs/cg\\999 rw - cgroup2 cgroup2 rw\n",
		"30 23 0:26 / sys rw - cgroup2 cgroup2 rw\n",
	} {
		if _, err := parseMountinfo(bad); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v; want refused", bad, err)
		}
	}
}

// TestParseCgroupLimit: memory.max's "max" and memory.limit_in_bytes's
// page-rounded largest int64 are no limit, a number of bytes is one, and
// anything else is refused.
func TestParseCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		data    string
		n       int64
		limited bool
	}{
		{"max\n", 0, false},
		{"536870912\n", 512 << 20, true},
		{"0\n", 0, true},
		{"9223372036854771712\n", 0, false}, // v1 unlimited, 4 KiB pages
		{"9223372036854710272\n", 0, false}, // v1 unlimited, 64 KiB pages
		{"1152921504606846975\n", 1<<60 - 1, true},
	} {
		n, limited, err := parseCgroupLimit(tc.data)
		if err != nil || n != tc.n || limited != tc.limited {
			t.Errorf("%q: %d, %t, %v; want %d, %t", tc.data, n, limited, err, tc.n, tc.limited)
		}
	}
	for _, bad := range []string{"", "\n", "1G\n", "-1\n", "max \n", " 5\n", "18446744073709551616\n"} {
		if _, _, err := parseCgroupLimit(bad); err == nil || !strings.Contains(err.Error(), "want max or a number of bytes") {
			t.Errorf("%q: %v; want refused", bad, err)
		}
	}
}

// TestCgroupMount: the cgroup's directory is found below the mount whose
// root holds it (a container without its own cgroup namespace sees its
// cgroup as the mount's root); a v1 mount must carry the memory
// controller; a path that leaves the hierarchy is held by none.
func TestCgroupMount(t *testing.T) {
	mounts := []mountEntry{
		{root: "/", point: "/sys/fs/cgroup/cpu", fstype: "cgroup", options: []string{"rw", "cpu"}},
		{root: "/docker/abc", point: "/sys/fs/cgroup/memory", fstype: "cgroup", options: []string{"rw", "memory"}},
		{root: "/docker/abc", point: "/sys/fs/cgroup", fstype: "cgroup2", options: []string{"rw"}},
	}
	for _, tc := range []struct {
		fstype, path, point, rel string
		ok                       bool
	}{
		{"cgroup", "/docker/abc", "/sys/fs/cgroup/memory", "", true},
		{"cgroup", "/docker/abc/sub/x", "/sys/fs/cgroup/memory", "sub/x", true},
		{"cgroup2", "/docker/abc/x", "/sys/fs/cgroup", "x", true},
		{"cgroup2", "/docker/abcd", "", "", false},
		{"cgroup2", "/other", "", "", false},
		{"cgroup2", "/docker/abc/../..", "", "", false},
	} {
		point, rel, ok := cgroupMount(mounts, tc.fstype, tc.path)
		if point != tc.point || rel != tc.rel || ok != tc.ok {
			t.Errorf("%s %s: %q, %q, %t; want %q, %q, %t", tc.fstype, tc.path, point, rel, ok, tc.point, tc.rel, tc.ok)
		}
	}
	if _, _, ok := cgroupMount([]mountEntry{{root: "/", point: "/", fstype: "cgroup2"}}, "cgroup2", "/../.."); ok {
		t.Error("/../.. (a cgroup outside the namespace) was held by a mount")
	}
}

// TestFormatByteSize: sizes are written in the largest unit that divides
// them, as --memory-limit reads them back.
func TestFormatByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1000: "1000B", 1536: "1536B", 3072: "3KiB", 460 << 20: "460MiB", 1 << 30: "1GiB", 3 << 40: "3TiB", 1<<30 + 1<<20: "1025MiB"} {
		if got := formatByteSize(n); got != want {
			t.Errorf("%d: %q; want %q", n, got, want)
		}
		if back, err := parseByteSize(formatByteSize(n)); err != nil || back != n {
			t.Errorf("%d: read back as %d, %v", n, back, err)
		}
	}
}
