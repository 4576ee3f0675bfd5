package opaplugins

import (
	"sort"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
)

// Bundles follows OPA's bundle plugin: which bundles are configured,
// which activation of each the engine has taken in, and why the last one
// was refused, if it was; and which bundle servers have stopped
// answering (stale). Its methods are safe for concurrent use; Init makes
// it ready.
type Bundles struct {
	mu         sync.Mutex
	discovery  bool           // a discovery bundle names the bundles
	discovered bool           // … and one has been activated
	plugin     *bundle.Plugin // the bundle plugin our listener is on
	configured []string
	seen       map[string]time.Time // LastSuccessfulActivation taken in
	active     map[string]string    // OPA's active revision
	errs       map[string]string
	dataDir    string // bundle data of the serving state, for engine.PolicyPaths
	// lastOK is when a download request of the bundle last succeeded
	// (a new revision or "not modified"), or when the watch began;
	// stale holds the bundles whose server has not answered for longer
	// than staleAfter allows.
	lastOK map[string]time.Time
	stale  map[string]bool
}

// staleAfter is how long a bundle polled by OPA may go without a download
// request that succeeds before it shows as stale: three times its
// polling.max_delay_seconds (120 s by default), plus its
// long_polling_timeout_seconds. A bundle triggered by hand is never
// stale. A download that fails shows at once (BundleHealth.Error); this
// catches a bundle server that stops answering without failing (a
// download that hangs).
func staleAfter(bp *bundle.Plugin, name string) (time.Duration, bool) {
	src, ok := bp.Config().Bundles[name]
	if !ok || src == nil || (src.Trigger != nil && *src.Trigger == plugins.TriggerManual) {
		return 0, false
	}
	maxDelay := int64(120)
	if src.Polling.MaxDelaySeconds != nil {
		maxDelay = *src.Polling.MaxDelaySeconds
	}
	d := 3 * time.Duration(maxDelay) * time.Second
	if lp := src.Polling.LongPollingTimeoutSeconds; lp != nil {
		d += time.Duration(*lp) * time.Second
	}
	return d, true
}

// Init makes b ready to follow the bundles; discovery says that a
// discovery bundle names them.
func (b *Bundles) Init(discovery bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = map[string]time.Time{}
	b.active = map[string]string{}
	b.errs = map[string]string{}
	b.lastOK = map[string]time.Time{}
	b.stale = map[string]bool{}
	b.discovery = discovery
}

// Attach follows bp, the bundle plugin the manager holds now: it returns
// the bundles bp is configured with, sorted, and whether bp is new to b
// (a listener is then to be registered on it).
func (b *Bundles) Attach(bp *bundle.Plugin) (names []string, fresh bool) {
	for name := range bp.Config().Bundles {
		names = append(names, name)
	}
	sort.Strings(names)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.configured = names
	fresh = b.plugin != bp
	b.plugin = bp
	return names, fresh
}

// Discovered records that the discovery bundle has been activated.
func (b *Bundles) Discovered() {
	b.mu.Lock()
	b.discovered = true
	b.mu.Unlock()
}

// Seen reports whether an activation of the bundle has been taken in
// (or refused).
func (b *Bundles) Seen(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, seen := b.seen[name]
	return seen
}

// LastActivation is the time of the bundle's last activation taken in
// (or refused).
func (b *Bundles) LastActivation(name string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[name]
}

// Refused records an activation of the bundle (at, revision rev) that
// the engine refused; the error is recorded by Failed.
func (b *Bundles) Refused(name string, at time.Time, rev string) {
	b.mu.Lock()
	b.seen[name] = at
	b.active[name] = rev
	b.mu.Unlock()
}

// Activated records an activation of the bundle (at, revision rev) taken
// in, with dir the directory of the serving state's bundle data; it
// returns the directory dir replaces, to be removed.
func (b *Bundles) Activated(name string, at time.Time, rev, dir string) (oldDir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen[name] = at
	b.active[name] = rev
	delete(b.errs, name)
	oldDir = b.dataDir
	b.dataDir = dir
	return oldDir
}

// Failed records why the bundle's last download or activation was
// refused.
func (b *Bundles) Failed(name, msg string) {
	b.mu.Lock()
	b.errs[name] = msg
	b.mu.Unlock()
}

// TakeDataDir returns the bundle data directory, to be removed, and
// forgets it.
func (b *Bundles) TakeDataDir() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	dir := b.dataDir
	b.dataDir = ""
	return dir
}

// StaleChange is a bundle that has become stale (its server has not
// answered since Last, for longer than Bound) or no longer is.
type StaleChange struct {
	Name  string
	Stale bool
	Last  time.Time
	Bound time.Duration
}

// CheckStale marks the bundles that have gone without an answer past
// staleAfter as stale, as of now, and calls changed for each bundle that
// has become stale or no longer is (no longer polled).
func (b *Bundles) CheckStale(now time.Time, changed func(StaleChange)) {
	b.mu.Lock()
	bp := b.plugin
	names := append([]string(nil), b.configured...)
	b.mu.Unlock()
	if bp == nil {
		return
	}
	for _, name := range names {
		limit, polled := staleAfter(bp, name)
		b.mu.Lock()
		last, ok := b.lastOK[name]
		if !ok {
			last = now
			b.lastOK[name] = now
		}
		stale := polled && now.Sub(last) > limit
		was := b.stale[name]
		b.stale[name] = stale
		b.mu.Unlock()
		if stale != was {
			changed(StaleChange{Name: name, Stale: stale, Last: last, Bound: limit})
		}
	}
}

// Answered records a download request of the bundle that succeeded (at,
// or now when at is zero). It reports whether b follows bundles (Init),
// and whether the bundle was stale.
func (b *Bundles) Answered(name string, at time.Time) (tracked, wasStale bool) {
	if at.IsZero() {
		at = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastOK == nil {
		return false, false
	}
	b.lastOK[name] = at
	wasStale = b.stale[name]
	delete(b.stale, name)
	return true, wasStale
}

// AllServed reports whether served (bundle name → revision being served)
// holds every configured bundle (and, with discovery, whether the
// discovery bundle has been activated).
func (b *Bundles) AllServed(served map[string]string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.discovery && !b.discovered {
		return false
	}
	for _, c := range b.configured {
		if _, ok := served[c]; !ok {
			return false
		}
	}
	return true
}

// Health is each configured bundle's state, with served the revisions
// being served (bundle name → revision); nil without bundles.
func (b *Bundles) Health(served map[string]string) map[string]BundleHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.configured) == 0 {
		return nil
	}
	out := map[string]BundleHealth{}
	for _, name := range b.configured {
		h := BundleHealth{Serving: served[name], Active: b.active[name], Error: b.errs[name], Stale: b.stale[name]}
		if last, ok := b.lastOK[name]; ok && h.Stale {
			h.LastSuccess = last.UTC().Format(time.RFC3339)
			if h.Error == "" {
				h.Error = "the bundle server has not answered since " + h.LastSuccess + "; the serving revision keeps serving"
			}
		}
		out[name] = h
	}
	return out
}

// BundleHealth is one configured bundle's state.
type BundleHealth struct {
	// Serving is the revision decisions are made with ("" before the
	// first activation).
	Serving string `json:"serving"`
	// Active is the revision OPA's bundle plugin last activated.
	Active string `json:"active,omitempty"`
	// Error is why the last download or activation was refused, if it
	// was, or that the bundle server has stopped answering (Stale); the
	// serving revision keeps serving.
	Error string `json:"error,omitempty"`
	// Stale says that no download of the bundle has succeeded for longer
	// than its polling allows (three times polling.max_delay_seconds,
	// plus long_polling_timeout_seconds) since LastSuccess.
	Stale       bool   `json:"stale,omitempty"`
	LastSuccess string `json:"last_success,omitempty"`
}
