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

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// policyWatch is serve --watch: every interval it looks at the files
// serve read at start (under the --policy and --shadow-policy paths, and
// the --registry file: their names, sizes and modification times, through
// links, as treeStamp reads them) and, when any changed and then stayed
// as they are for one more interval (settle: a file being written is not
// read half-written), reloads them together (server.Reload, the registry
// read again): the policies, the registry and the shadow policy that
// compile together are swapped in for the requests that follow; when any
// of them does not (a policy that does not compile, a registry that does
// not parse, a filter for a capability the new registry drops), none is,
// the error is logged, and the last good ones keep serving. Policies
// that drop a package or a rule the serving ones define are refused so
// too, unless allowDrops (--watch-drops accept): then they are swapped in
// and the server logs a warning naming what they drop.
//
// A watch is begun (newPolicyWatch) before the server reads the files,
// so that a change made while it does is not missed; run returns when ctx
// is done.
type policyWatch struct {
	paths    []string // every path watched
	registry string   // the --registry file; "" without
	// allowDrops swaps in policies that drop packages or rules
	// (server.AllowDrops).
	allowDrops bool
	settle     settle
}

func newPolicyWatch(policies, shadow []string, registry string, allowDrops bool) *policyWatch {
	paths := append(append([]string{}, policies...), shadow...)
	if registry != "" {
		paths = append(paths, registry)
	}
	return &policyWatch{paths: paths, registry: registry, allowDrops: allowDrops, settle: settle{last: treeStamp(paths)}}
}

// settle says when the watched files are to be read again: once their
// stamp differs from the last one read and is the same at the next look.
// An editor or a copy that truncates a file and then writes it leaves it
// empty or cut short for a moment; read then, a registry cut at a line
// would be a smaller registry that parses, and would be swapped in.
type settle struct {
	last    string // the stamp last read (or refused)
	pending string // a new stamp seen once; "" for none
}

// next takes the stamp now and reports whether to read the files.
func (s *settle) next(now string) bool {
	switch now {
	case s.last:
		s.pending = "" // changed and changed back
		return false
	case s.pending:
		s.last, s.pending = now, ""
		return true
	}
	s.pending = now
	return false
}

func (w *policyWatch) run(ctx context.Context, srv *server.Server, interval time.Duration, logger *slog.Logger) {
	every(ctx, interval, func() {
		if !w.settle.next(treeStamp(w.paths)) {
			return
		}
		var opts []server.ReloadOption
		if w.registry != "" {
			opts = append(opts, server.ReadRegistry(func() (*facts.Registry, error) { return loader.ReadRegistry(w.registry) }))
		}
		if w.allowDrops {
			opts = append(opts, server.AllowDrops())
		}
		swapped, err := srv.Reload(ctx, opts...)
		switch {
		case err != nil:
			logger.Error("files changed but not reloaded; the last good policies and registry keep serving", "err", err)
		case swapped:
			logger.Info("policies and registry reloaded", "paths", w.paths)
		default:
			logger.Debug("files changed; the policies and the registry did not", "paths", w.paths)
		}
	})
}

// every calls look at each tick of interval until ctx is done: the loop
// of each --watch watcher (the policies, the receipt key).
func every(ctx context.Context, interval time.Duration, look func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		look()
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
