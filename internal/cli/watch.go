package cli

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"time"

	"github.com/policycheck/policycheck/server"
)

// policyWatch is serve --watch: every interval it looks at the files
// under the --policy paths (their names, sizes and modification times)
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

// treeStamp sums up the regular files under paths: each one's path, size
// and modification time (a path that cannot be read, its error).
func treeStamp(paths []string) string {
	var lines []string
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				lines = append(lines, p+": "+err.Error())
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				lines = append(lines, p+": "+err.Error())
				return nil
			}
			lines = append(lines, fmt.Sprintf("%s %d %d", p, fi.Size(), fi.ModTime().UnixNano()))
			return nil
		})
		if err != nil {
			lines = append(lines, root+": "+err.Error())
		}
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l + "\n"))
	}
	return string(h.Sum(nil))
}
