package cli

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/policycheck/policycheck/server"
)

// policyWatch is serve --watch: every interval it looks at the files
// under the --policy paths (their names, sizes and modification times,
// through links, as treeStamp reads them)
// and, when they changed, reloads the policies (server.Reload): policies
// that compile are swapped in for the requests that follow, and policies
// that do not are refused, logged, and the last good ones keep serving.
// The --shadow-policy files are read at start only: a change to them is
// logged, not silently passed over.
//
// A watch is begun (newPolicyWatch) before the server reads the policies,
// so that a change made while it does is not missed; run returns when ctx
// is done.
type policyWatch struct {
	paths, shadow    []string
	last, lastShadow string
}

func newPolicyWatch(paths, shadow []string) *policyWatch {
	return &policyWatch{paths: paths, shadow: shadow, last: treeStamp(paths), lastShadow: treeStamp(shadow)}
}

func (w *policyWatch) run(ctx context.Context, srv *server.Server, interval time.Duration, logger *slog.Logger) {
	paths, shadow, last, lastShadow := w.paths, w.shadow, w.last, w.lastShadow
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := treeStamp(shadow); now != lastShadow {
			lastShadow = now
			logger.Warn("--shadow-policy files changed; they are read at start only: restart serve to take them in")
		}
		now := treeStamp(paths)
		if now == last {
			continue
		}
		last = now
		swapped, err := srv.Reload(ctx)
		switch {
		case err != nil:
			logger.Error("policies changed but not reloaded; the last good ones keep serving", "err", err)
		case swapped:
			logger.Info("policies reloaded", "paths", paths)
		default:
			logger.Debug("policy files changed; the policies did not", "paths", paths)
		}
	}
}

// treeStamp sums up the files under paths as the engine reads them
// (engine.PolicyPaths: links followed, entries whose name begins with "."
// below a path not read): each file's path, size and modification time,
// or a path's error. A Kubernetes ConfigMap update, which points ..data
// at a new directory, changes the files the links reach.
func treeStamp(paths []string) string {
	var lines []string
	seen := map[string]bool{} // directories walked, by real path: links may loop
	var walk func(p string, root bool)
	walk = func(p string, root bool) {
		if !root && strings.HasPrefix(filepath.Base(p), ".") {
			return
		}
		fi, err := os.Stat(p)
		if err != nil {
			lines = append(lines, p+": "+err.Error())
			return
		}
		if !fi.IsDir() {
			lines = append(lines, fmt.Sprintf("%s %d %d", p, fi.Size(), fi.ModTime().UnixNano()))
			return
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			return
		}
		seen[real] = true
		entries, err := os.ReadDir(p)
		if err != nil {
			lines = append(lines, p+": "+err.Error())
			return
		}
		for _, e := range entries {
			walk(filepath.Join(p, e.Name()), false)
		}
	}
	for _, root := range paths {
		walk(root, true)
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l + "\n"))
	}
	return string(h.Sum(nil))
}
