package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cgroupNoLimit: a cgroup memory limit at or above it is no limit. cgroup
// v1 writes "unlimited" as the largest page-rounded int64
// (9223372036854771712 with 4 KiB pages), v2 as "max"; no machine has
// an exbibyte.
const cgroupNoLimit = 1 << 60

// cgroupRootKey is the context key of the directory that stands for /
// when --memory-limit auto reads /proc and the cgroup files: tests put a
// fake tree there (withCgroupRoot); the command line reads the real one.
type cgroupRootKey struct{}

// withCgroupRoot returns ctx under which --memory-limit auto reads its
// files below root instead of /.
func withCgroupRoot(ctx context.Context, root string) context.Context {
	return context.WithValue(ctx, cgroupRootKey{}, root)
}

// cgroupRoot is the root ctx carries, or /.
func cgroupRoot(ctx context.Context) string {
	if r, ok := ctx.Value(cgroupRootKey{}).(string); ok {
		return r
	}
	return "/"
}

// cgroupLimit is the memory limit the kernel puts on the process and the
// file that set it.
type cgroupLimit struct {
	bytes int64
	file  string
}

// errNoCgroupLimit: no cgroup memory limit was found (no cgroup, none set,
// or none visible).
var errNoCgroupLimit = errors.New("no cgroup memory limit found")

// readCgroupMemoryLimit finds the memory limit of the process's cgroup as
// the kernel applies it: the smallest of the limits of the cgroup and its
// ancestors, as far up as the cgroup file system is mounted (in a
// container, its own cgroup). Under cgroup v2 (/proc/self/cgroup's
// 0::PATH) it reads memory.max and memory.high ("max": none; above
// memory.high the kernel throttles the cgroup and reclaims its memory
// hard, which a heap near it would pay for in pauses); under v1 (the memory
// controller's line) memory.limit_in_bytes (cgroupNoLimit or above:
// none). The mounts come from /proc/self/mountinfo. Every path is read
// below root (/ but in tests). A file that cannot be read or parsed is an
// error naming it, and so is finding no limit (errNoCgroupLimit, with
// each file read and what it held): the caller has nothing to go by.
func readCgroupMemoryLimit(root string) (cgroupLimit, error) {
	procFile := filepath.Join(root, "proc/self/cgroup")
	data, err := os.ReadFile(procFile)
	if err != nil {
		return cgroupLimit{}, fmt.Errorf("%w: %w", errNoCgroupLimit, err)
	}
	cg, err := parseProcCgroup(string(data))
	if err != nil {
		return cgroupLimit{}, fmt.Errorf("%s: %w", procFile, err)
	}
	// A memory controller on a v1 hierarchy is not on the v2 one (a
	// hybrid layout has both lines): v1 first.
	fstype, cgPath, files := "cgroup", cg.v1, []string{"memory.limit_in_bytes"}
	switch {
	case cg.hasV1:
	case cg.hasV2:
		fstype, cgPath, files = "cgroup2", cg.v2, []string{"memory.max", "memory.high"}
	default:
		return cgroupLimit{}, fmt.Errorf("%w: %s names neither a cgroup v2 path (0::PATH) nor a cgroup v1 memory controller", errNoCgroupLimit, procFile)
	}
	mountFile := filepath.Join(root, "proc/self/mountinfo")
	data, err = os.ReadFile(mountFile)
	if err != nil {
		return cgroupLimit{}, fmt.Errorf("%w: %w", errNoCgroupLimit, err)
	}
	mounts, err := parseMountinfo(string(data))
	if err != nil {
		return cgroupLimit{}, fmt.Errorf("%s: %w", mountFile, err)
	}
	point, rel, ok := cgroupMount(mounts, fstype, cgPath)
	if !ok {
		return cgroupLimit{}, fmt.Errorf("%w: %s has no %s mount holding the process's cgroup %s (%s)", errNoCgroupLimit, mountFile, mountKind(fstype), cgPath, procFile)
	}
	top := filepath.Join(root, point)
	var (
		best cgroupLimit
		seen []string
	)
	for dir := filepath.Join(top, rel); ; dir = filepath.Dir(dir) {
		for _, file := range files {
			p := filepath.Join(dir, file)
			data, err := os.ReadFile(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// The memory controller is not enabled at this level (or
				// it is the root cgroup): no limit here.
				seen = append(seen, p+": absent")
			case err != nil:
				return cgroupLimit{}, err
			default:
				n, limited, err := parseCgroupLimit(string(data))
				if err != nil {
					return cgroupLimit{}, fmt.Errorf("%s: %w", p, err)
				}
				if !limited {
					seen = append(seen, p+": "+strings.TrimSpace(string(data))+" (no limit)")
				} else if best.file == "" || n < best.bytes {
					best = cgroupLimit{bytes: n, file: p}
				}
			}
		}
		if len(dir) <= len(top) {
			break
		}
	}
	if best.file == "" {
		return cgroupLimit{}, fmt.Errorf("%w: %s", errNoCgroupLimit, strings.Join(seen, ", "))
	}
	return best, nil
}

// mountKind names a cgroup file system type for a message.
func mountKind(fstype string) string {
	if fstype == "cgroup" {
		return "cgroup v1 memory"
	}
	return "cgroup2"
}

// procCgroup is what /proc/self/cgroup says of the process: its cgroup v2
// path and its cgroup v1 memory controller's path, each if present.
type procCgroup struct {
	v1, v2       string
	hasV1, hasV2 bool
}

// parseProcCgroup reads /proc/self/cgroup: lines ID:CONTROLLERS:PATH,
// 0::PATH for cgroup v2, CONTROLLERS a comma-separated list under v1.
func parseProcCgroup(data string) (procCgroup, error) {
	var cg procCgroup
	for i, line := range strings.Split(strings.TrimRight(data, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			return procCgroup{}, fmt.Errorf("line %d %q: want ID:CONTROLLERS:/PATH", i+1, line)
		}
		switch {
		case f[0] == "0" && f[1] == "":
			cg.v2, cg.hasV2 = f[2], true
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			cg.v1, cg.hasV1 = f[2], true
		}
	}
	return cg, nil
}

// mountEntry is a line of /proc/self/mountinfo: the directory of the file
// system mounted (its root), where it is mounted, its type and its super
// options.
type mountEntry struct {
	root, point, fstype string
	options             []string
}

// parseMountinfo reads /proc/self/mountinfo (proc(5)): ID PARENT
// MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS,
// paths with \NNN octal escapes.
func parseMountinfo(data string) ([]mountEntry, error) {
	var out []mountEntry
	for i, line := range strings.Split(strings.TrimRight(data, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			return nil, fmt.Errorf("line %d %q: want ID PARENT MAJOR:MINOR ROOT POINT OPTIONS ... - TYPE SOURCE OPTIONS", i+1, line)
		}
		root, err1 := unescapeMountPath(f[3])
		point, err2 := unescapeMountPath(f[4])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("line %d %q: %w", i+1, line, err)
		}
		out = append(out, mountEntry{root: root, point: point, fstype: f[sep+1], options: strings.Split(f[sep+3], ",")})
	}
	return out, nil
}

// unescapeMountPath undoes mountinfo's \NNN octal escapes (of space, tab,
// newline and backslash).
func unescapeMountPath(s string) (string, error) {
	if !strings.HasPrefix(s, "/") {
		return "", fmt.Errorf("path %q: want an absolute path", s)
	}
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("path %q: a \\ without three octal digits", s)
		}
		n, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("path %q: a \\ without three octal digits", s)
		}
		b.WriteByte(byte(n))
		i += 3
	}
	return b.String(), nil
}

// cgroupMount finds the mount of type fstype (cgroup2, or cgroup with the
// memory controller) that holds the cgroup at cgPath, and returns its
// mount point and the cgroup's directory below it. A mount's root is the
// cgroup it shows at its mount point (a container without its own cgroup
// namespace sees its cgroup at /sys/fs/cgroup, root /docker/ID). A path
// that leaves its hierarchy's root (/.., a cgroup namespace's view of a
// cgroup outside it) is held by no mount.
func cgroupMount(mounts []mountEntry, fstype, cgPath string) (point, rel string, ok bool) {
	if path.Clean(cgPath) != cgPath {
		return "", "", false
	}
	for _, m := range mounts {
		if m.fstype != fstype || fstype == "cgroup" && !slices.Contains(m.options, "memory") {
			continue
		}
		switch {
		case m.root == "/":
			return m.point, cgPath[1:], true
		case cgPath == m.root:
			return m.point, "", true
		case strings.HasPrefix(cgPath, m.root+"/"):
			return m.point, cgPath[len(m.root)+1:], true
		}
	}
	return "", "", false
}

// parseCgroupLimit reads memory.max or memory.limit_in_bytes: "max" or a
// number of bytes; limited is false for "max" and for cgroupNoLimit or
// more.
func parseCgroupLimit(data string) (n int64, limited bool, err error) {
	s := strings.TrimSuffix(data, "\n")
	if s == "max" {
		return 0, false, nil
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q: want max or a number of bytes", s)
	}
	if u >= cgroupNoLimit {
		return 0, false, nil
	}
	return int64(u), true, nil
}
