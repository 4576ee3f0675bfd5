package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/lru"
	"github.com/policycheck/policycheck/internal/ground/regoutil"
	"github.com/policycheck/policycheck/trust"
)

// Option configures an Engine at construction.
type Option func(*config)

type config struct {
	defaults  bool
	fsys      []fs.FS
	sources   []Source
	paths     []string
	registry  *facts.Registry
	cacheSize int
	// decisionCache bounds the decision memo; 0 turns it off.
	decisionCache int
	deadline      time.Duration
	// onWarning receives the warnings of each compiled policy set.
	onWarning []func(PolicyProblem)
	// cachesOff names the caches turned off (see cacheFilters and the
	// others): only benchmarks do that, through export_test.go, to
	// measure what each saves (docs/caches.md).
	cachesOff map[string]bool
	// flowMinLength and flowIndexCap are the flow options (0: the
	// defaults of package facts).
	flowMinLength, flowIndexCap int
	// flowTokens: input.call.flows match by token too.
	flowTokens bool
}

// The engine's caches by their names in docs/caches.md.
const (
	cacheFilters  = "engine.filters"
	cacheContexts = "engine.contexts"
	cacheMemo     = "engine.memo"
)

// Policies adds the .rego files of fsys (tests excluded) to the policy set.
func Policies(fsys fs.FS) Option { return func(c *config) { c.fsys = append(c.fsys, fsys) } }

// PolicyPaths adds .rego files, directories of policies and data files,
// and OPA bundles (.tar.gz files or directories with a .manifest). Below
// a directory, entries whose name begins with "." are not read, as go
// and policycheck test skip them: a linter's .regal/ beside the policies,
// and the ..data and ..<timestamp> entries through which a Kubernetes
// ConfigMap or Secret volume holds its files (read through them as well,
// every module would load three times, and a complete rule would
// conflict with itself). Symbolic links are followed.
func PolicyPaths(paths ...string) Option {
	return func(c *config) { c.paths = append(c.paths, paths...) }
}

// Modules adds policy modules given as source text.
func Modules(src ...Source) Option { return func(c *config) { c.sources = append(c.sources, src...) } }

// WithoutDefaults leaves out the shipped policies: the policy set must
// then define package policycheck.availability itself.
func WithoutDefaults() Option { return func(c *config) { c.defaults = false } }

// Registry sets the tool registry (required).
func Registry(reg *facts.Registry) Option { return func(c *config) { c.registry = reg } }

// CacheSize bounds the filter cache (entries, each the filter results of
// one active set under one context; default 4096).
func CacheSize(n int) Option { return func(c *config) { c.cacheSize = n } }

// DecisionCache bounds the decision memo (entries; default 1024; 0 turns
// it off). The memo keeps the policy's result for recent input documents:
// a decision whose input equals one decided before (the next request of
// an agent step that revealed and loaded nothing new, a same-step
// rebuild, a retried request) is answered without evaluating Rego. It is
// off for a policy set in which any rule reaches a nondeterministic
// built-in, whose result is not a function of its input.
func DecisionCache(n int) Option { return func(c *config) { c.decisionCache = max(n, 0) } }

// DefaultDeadline bounds each decision unless Decide is given its own
// (default 5s). A decision that runs out of time fails closed.
func DefaultDeadline(d time.Duration) Option { return func(c *config) { c.deadline = d } }

// FlowMinLength sets the shortest string of a tool return, in bytes, that
// a call's argument is matched against for input.call.flows (default
// facts.DefaultFlowMinLength, 8). It must be at least 1.
func FlowMinLength(n int) Option { return func(c *config) { c.flowMinLength = n } }

// FlowIndexCap bounds the bytes of return strings indexed per history
// for input.call.flows (default facts.DefaultFlowIndexCap); past it
// input.facts.flow_index_truncated is true. It must be at least 1.
func FlowIndexCap(n int) Option { return func(c *config) { c.flowIndexCap = n } }

// FlowTokens turns token matching of input.call.flows on or off (default
// off): a source's strings are indexed by token too (lines, key-value
// values, runs, emails, URLs, IBANs, digit runs; docs/flows.md), and an
// argument holding one flows with match "token" (facts.FlowTokens).
func FlowTokens(on bool) Option { return func(c *config) { c.flowTokens = on } }

// Engine evaluates decisions. It compiles its policies once, prepares its
// queries once, and is safe for concurrent use: the compiled snapshot
// (policies, registry, store) is immutable and swapped atomically by
// Reload; each decision builds its own input and never writes shared state
// other than the engine's caches (docs/caches.md).
type Engine struct {
	snap atomic.Pointer[snapshot]
	// reload serializes Reload.
	reload sync.Mutex
	// base is the configuration New was given; every Reload starts from it.
	base config
}

// contextCacheSize bounds the context cache (see contextValue).
const contextCacheSize = 256

// snapshot is one immutable compiled state.
type snapshot struct {
	*compiled
	reg        *facts.Registry
	regRev     string
	toolsInput *ast.Term
	// known are the registry's tool names and the framework tools, sorted,
	// with their terms: input sets are built from them (see nameTerms), and
	// reading a decision's sets looks each one up (names, see setNames).
	known nameTerms
	// tools are the registry's tool names of known (no framework tools),
	// with the same terms: a filter's result is read against them.
	tools nameTerms
	names []*ast.Term
	// The caches (docs/caches.md); a nil cache is one turned off.
	// filterCache holds the composed results of the filters of one
	// active set under one context (see runFilters); filterHits and
	// filterMisses count the filter results it answered and the filters
	// evaluated.
	filterCache              *lru.Cache[*filterResult]
	filterHits, filterMisses atomic.Int64
	// decisions is the decision memo (see memo.go).
	decisions *lru.Cache[memoEntry]
	// contexts holds recent request contexts, converted (see
	// contextValue).
	contexts *lru.Cache[contextEntry]
	deadline time.Duration
	modules  []string
	// inventory: see Engine.Inventory.
	inventory Inventory
	// shipped names the modules of the shipped defaults (explanations
	// say so: "policies/lib/gate.rego" reads like a user's own file).
	shipped map[string]bool
	// warnings: see Engine.Warnings.
	warnings []PolicyProblem
}

// New compiles the policies against the registry. A policy set that does
// not parse or compile, or whose filters or rules break the operator
// contract (docs/writing-filters.md), is a *PolicyError.
func New(ctx context.Context, opts ...Option) (*Engine, error) {
	cfg := config{defaults: true, deadline: 5 * time.Second, decisionCache: 1024}
	for _, o := range opts {
		o(&cfg)
	}
	e := &Engine{base: cfg}
	s, err := build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e.snap.Store(s)
	return e, nil
}

func build(ctx context.Context, cfg config) (*snapshot, error) {
	if cfg.registry == nil {
		return nil, errors.New("engine: a registry is required")
	}
	if cfg.flowMinLength < 0 || cfg.flowIndexCap < 0 {
		return nil, fmt.Errorf("engine: the flow minimum length (%d) and index cap (%d) must be at least 1", cfg.flowMinLength, cfg.flowIndexCap)
	}
	ps, err := loadPolicies(cfg.defaults, cfg.fsys, cfg.sources, cfg.paths)
	if err != nil {
		return nil, err
	}
	regData, toolsInput, regRev := registryData(cfg.registry)
	c, err := compile(ctx, ps, cfg.registry, regData)
	if err != nil {
		return nil, err
	}
	if c.opts.Flows {
		c.opts.FlowMinLength, c.opts.FlowIndexCap = cfg.flowMinLength, cfg.flowIndexCap
		c.opts.FlowTokens = cfg.flowTokens
	}
	mods := make([]string, 0, len(ps.modules))
	for n := range ps.modules {
		mods = append(mods, n)
	}
	sort.Strings(mods)
	// The known names: the tools, framework and registry, and the
	// capability ids (the loaded and active sets hold those).
	names := append(slices.Clone(cfg.registry.ToolNames()), "load_capability", "search_tools")
	for _, c := range cfg.registry.Capabilities() {
		names = append(names, c.ID)
	}
	slices.Sort(names)
	known := newNameTerms(slices.Compact(names))
	var tools nameTerms
	for i, name := range known.names {
		if _, isTool := cfg.registry.Tool(name); isTool {
			tools.names = append(tools.names, name)
			tools.terms = append(tools.terms, known.terms[i])
		}
	}
	s := &snapshot{compiled: c, reg: cfg.registry, regRev: regRev, toolsInput: toolsInput, known: known, tools: tools, names: known.terms,
		deadline: cfg.deadline, modules: mods, inventory: inventoryOf(ps), shipped: ps.shipped}
	filterEntries := cfg.cacheSize
	if filterEntries <= 0 {
		filterEntries = 4096
	}
	if !cfg.cachesOff[cacheFilters] {
		s.filterCache = lru.New[*filterResult](filterEntries, 0, nil)
	}
	if !cfg.cachesOff[cacheContexts] {
		s.contexts = lru.New[contextEntry](contextCacheSize, 0, nil)
	}
	if cfg.decisionCache > 0 && c.pure && !cfg.cachesOff[cacheMemo] {
		s.decisions = lru.New[memoEntry](cfg.decisionCache, 0, nil)
	}
	s.warnings = unreadPackageWarnings(c)
	for _, w := range s.warnings {
		for _, f := range cfg.onWarning {
			f(w)
		}
	}
	return s, nil
}

// Reload compiles a new snapshot with the construction options plus opts
// (not those of earlier reloads: each Reload starts from what New was
// given, re-reading its files, directories and bundles) and swaps it in
// atomically; on error the current snapshot keeps serving. Decisions in
// flight finish on the snapshot they started with.
func (e *Engine) Reload(ctx context.Context, opts ...Option) error {
	e.reload.Lock()
	defer e.reload.Unlock()
	cfg := e.base
	cfg.fsys = append([]fs.FS(nil), cfg.fsys...)
	cfg.sources = append([]Source(nil), cfg.sources...)
	cfg.paths = append([]string(nil), cfg.paths...)
	cfg.onWarning = slices.Clone(cfg.onWarning)
	for _, o := range opts {
		o(&cfg)
	}
	s, err := build(ctx, cfg)
	if err != nil {
		return err
	}
	e.snap.Store(s)
	return nil
}

// Registry returns the registry of the current snapshot.
func (e *Engine) Registry() *facts.Registry { return e.snap.Load().reg }

// FactOptions returns the optional facts the current policies may read
// (input.facts.tool_calls, input.call.flows, and the returns per tool
// input.call.window is built from) with their settings: a Request whose Facts come from a
// facts.Tracker should carry them (a tracker built with
// facts.NewTracker and these options, read with FactsWith), or the
// decision derives them from Request.History.
func (e *Engine) FactOptions() facts.Options { return e.snap.Load().opts }

// Revision returns the current policy and registry revisions.
func (e *Engine) Revision() (policy, registry string) {
	s := e.snap.Load()
	return s.rev, s.regRev
}

// Modules returns the file names of the compiled policy modules.
func (e *Engine) Modules() []string { return e.snap.Load().modules }

// CacheStats reports filter-cache hits (filter results answered from
// it), misses (filters evaluated) and entries (each the filter results
// of one active set under one context).
func (e *Engine) CacheStats() (hits, misses int64, entries int) {
	s := e.snap.Load()
	entries, _ = s.filterCache.Stats()
	return s.filterHits.Load(), s.filterMisses.Load(), entries
}

// ContextCacheStats reports context-cache hits (request contexts found
// converted), misses (contexts converted and kept) and entries. A
// context over 4,096 bytes of JSON is converted every time and counted
// in neither.
func (e *Engine) ContextCacheStats() (hits, misses int64, entries int) {
	return lookups(e.snap.Load().contexts)
}

// DecisionCacheStats reports decision-memo hits, misses and entries (all
// zero when the memo is off; see DecisionCache).
func (e *Engine) DecisionCacheStats() (hits, misses int64, entries int) {
	return lookups(e.snap.Load().decisions)
}

func lookups[T any](c *lru.Cache[T]) (hits, misses int64, entries int) {
	hits, misses = c.Lookups()
	entries, _ = c.Stats()
	return hits, misses, entries
}

// Request is one decision's input.
type Request struct {
	// History is the message history. When Facts is set, it is read only
	// for the optional facts the policies read (Engine.FactOptions) that
	// Facts lacks.
	History facts.History
	// Facts, when set, are used as they are (for example from a Tracker).
	// A decision whose policies read an optional fact that Facts lacks
	// and that History cannot give fails closed.
	Facts *facts.Facts
	// Context reaches every policy as input.context (any JSON value;
	// nil means {}).
	Context any
	// Approvals are the answers to calls that needed approval, keyed by
	// tool_call_id (pydantic-ai's DeferredToolResults.approvals with the
	// digest of each call). An approval binds to a dispatched call only
	// when the call's digest (trust.CallDigest) is the one it carries, and
	// authorises one call occurrence: it binds to none when calls of the
	// response share its id, nor once the history holds an outcome for
	// the id (facts.Call.Answered). A bound approval reaches the policies
	// as input.call.approval.
	Approvals facts.Approvals
}

// DecideOption configures one decision.
type DecideOption func(*decideConfig)

type decideConfig struct {
	deadline time.Duration
	// beforeEval, when set, runs after the deadline check and before the
	// policy is evaluated: tests use it to cancel a decision while its
	// evaluation runs instead of racing a timer (export_test.go).
	beforeEval func(context.Context)
	// perCall, when set, evaluates the decision part by part as if its
	// combined evaluation had erred (percall.go), bypassing the memo:
	// tests hold the two evaluations to one answer (export_test.go).
	perCall   bool
	approvals facts.Approvals
	// evidence, when set, vouches for the evidence of a history the
	// decision derives its facts from (VerifiedEvidence).
	evidence *evidenceVoucher
	// signer, when set, signs the receipts of the executing calls for
	// the run runID (WithReceipts).
	signer *trust.Signer
	runID  string
	// run, for a Run's step, accounts in plan for the decision being
	// assembled (its Step and Retries).
	run  *Run
	plan *stepPlan
}

// WithReceipts signs, as the decision is assembled, an execution receipt
// for each call that executes (CallVerdict.Receipt) with s, for the run
// runID ("" for a stateless decision; a Run's steps pass the run's id).
// A receipt that cannot be signed is an error: no decision is returned,
// and a Run's step leaves the run as it was. With s nil nothing is
// signed.
func WithReceipts(s *trust.Signer, runID string) DecideOption {
	return func(c *decideConfig) { c.signer, c.runID = s, runID }
}

// ErrSign is the error, wrapped, of a decision whose receipt could not
// be signed (WithReceipts).
var ErrSign = errors.New("engine: an execution receipt could not be signed")

// WithApprovals sets the approvals of a decision whose Request carries
// none (see Request.Approvals): the way to hand them to Run.Step, and to
// every step of a replay. Each still binds only to the call whose digest
// it carries, and only until the history holds that call's outcome.
func WithApprovals(a facts.Approvals) DecideOption {
	return func(c *decideConfig) { c.approvals = a }
}

// WithDeadline bounds this decision; when it runs out the decision fails
// closed (Decision.FailedClosed), with a nil error from Decide.
func WithDeadline(d time.Duration) DecideOption { return func(c *decideConfig) { c.deadline = d } }

// Decide evaluates one decision. Policy errors, timeouts and undefined
// results do not return an error: they fail the decision closed (every
// call denied) and say why in Decision.Errors, so a nil error does not
// mean the policy decided: check Decision.FailedClosed. An error is
// returned only for input the engine cannot represent (a context that is
// not JSON) and for a receipt that cannot be signed (WithReceipts).
//
// A panic on the decision's path (a bug) is recovered: Decide returns a
// decision failed closed with the panic in Errors (Decision.Panicked),
// never a crash of the caller.
func (e *Engine) Decide(ctx context.Context, req Request, opts ...DecideOption) (*Decision, error) {
	s := e.snap.Load()
	dc := s.config(opts)
	d, _, err := s.decide(ctx, req, &dc)
	return d, err
}

// Input returns the input document the decision query would receive for
// req, as JSON-compatible values (sets become sorted arrays): what
// `policycheck facts --format input` prints and opa test fixtures hold.
func (e *Engine) Input(ctx context.Context, req Request) (any, error) {
	s := e.snap.Load()
	p, err := s.prepare(ctx, req, &decideConfig{})
	if err != nil {
		return nil, err
	}
	return ast.JSON(p.input)
}

func fingerprint(policyRev, regRev, ctxDigest string, active, keys []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "policy=%s\x00registry=%s\x00context=%s\x00active=%s\x00", policyRev, regRev, ctxDigest, idsKey(active))
	for _, k := range keys {
		fmt.Fprintf(h, "filter=%d:%s\x00", len(k), k)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func isTool(reg *facts.Registry, name string) bool {
	_, ok := reg.Tool(name)
	return ok
}

var equalStrings = slices.Equal[[]string]

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// runFilters applies the filters of the active capabilities, through the
// filter cache.
func (s *snapshot) runFilters(ctx context.Context, active []string, ctxTerm *ast.Term, ctxDigest string) *filterResult {
	activeKey := idsKey(active)
	// A filter's input holds the registry's tools, the context and the
	// active set, and nothing else: so the results of the filters of one
	// active set, and their composition, are a pure function of the
	// revisions, the context and the active set (the capability ids
	// follow from the active set), and are cached whole under those. A hit
	// counts as a hit of each filter result it stands for.
	compKey := s.rev + s.regRev + ctxDigest + activeKey
	if fr, ok := s.filterCache.Get(compKey); ok {
		s.filterHits.Add(int64(len(fr.keys)))
		return fr
	}
	fr := &filterResult{droppedBy: map[string][]string{}}
	var activeTerm *ast.Term
	for _, id := range active {
		flt := s.filters[id]
		if flt == nil {
			continue
		}
		if activeTerm == nil {
			activeTerm = arrayOf(active)
		}
		fr.keys = append(fr.keys, cacheKey(s.rev, s.regRev, id, activeKey, ctxDigest))
		s.filterMisses.Add(1)
		res := s.evalFilter(ctx, flt, activeTerm, ctxTerm)
		if res.err != "" {
			fr.errors = append(fr.errors, filterError{Capability: id, File: flt.file, Message: res.err})
			continue
		}
		for _, name := range res.dropped {
			fr.droppedBy[name] = append(fr.droppedBy[name], id)
		}
	}
	for name := range fr.droppedBy {
		fr.dropped = append(fr.dropped, name)
	}
	fr.fingerprint = fingerprint(s.rev, s.regRev, ctxDigest, active, fr.keys)
	sort.Strings(fr.dropped)
	// A failed filter is not cached (its decision fails closed; a timeout
	// or a cancellation says nothing about the filter).
	if len(fr.errors) == 0 && ctx.Err() == nil {
		fr.termv = fr.term(&setTerms{known: &s.known})
		s.filterCache.Put(compKey, fr)
	}
	return fr
}

// cacheKey is a filter's key in the decision's fingerprint: the revisions and the context digest
// (fixed-length hex) and the capability id and active set, length-prefixed
// so that no two different keys spell the same string.
func cacheKey(policyRev, regRev, id, activeKey, ctxDigest string) string {
	return policyRev + regRev + ctxDigest + strconv.Itoa(len(id)) + ":" + id + activeKey
}

// idsKey spells a sorted id list unambiguously, whatever bytes the ids
// hold: each id is prefixed with its length.
func idsKey(ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.Itoa(len(id)))
		b.WriteByte(':')
		b.WriteString(id)
	}
	return b.String()
}

// filterEval is one filter's result.
type filterEval struct {
	// dropped is the sorted registry tools the filter did not keep.
	dropped []string
	err     string
}

// evalFilter runs one capability's prepare_tools. Anything but a set of
// registry tool names is an error, which fails the decision closed. The
// set is read off the AST by looking up the registry's names, which are
// sorted: no conversion to JSON (which sorts a set with OPA's generic term
// order) and no map of the names kept.
func (s *snapshot) evalFilter(ctx context.Context, flt *filter, active, ctxTerm *ast.Term) *filterEval {
	entry := &filterEval{}
	input := filterInput(s.toolsInput, ctxTerm, active)
	rs, err := flt.query.Eval(ctx, s.evalWith(input)...)
	if err != nil {
		entry.err = err.Error()
		return entry
	}
	if len(rs) == 0 {
		entry.err = "prepare_tools is undefined"
		return entry
	}
	x, _ := rs[0].Bindings["x"].(*ast.Term)
	if x == nil {
		entry.err = "prepare_tools is undefined"
		return entry
	}
	set, isSet := x.Value.(ast.Set)
	if !isSet {
		v, _ := ast.JSON(x.Value)
		entry.err = fmt.Sprintf("prepare_tools must be a set of tool names, not %s", regoutil.JSONKind(v))
		return entry
	}
	kept := 0
	for i, name := range s.tools.names {
		if set.Contains(s.tools.terms[i]) {
			kept++
		} else {
			entry.dropped = append(entry.dropped, name)
		}
	}
	if kept == set.Len() {
		return entry
	}
	// Something in the set is not a registry tool: name the first, in
	// OPA's order (non-strings before strings).
	entry.dropped = nil
	set.Until(func(t *ast.Term) bool {
		name, isStr := t.Value.(ast.String)
		switch {
		case !isStr:
			v, _ := ast.JSON(t.Value)
			entry.err = fmt.Sprintf("prepare_tools must be a set of tool names, found %v", v)
		case !isTool(s.reg, string(name)):
			entry.err = fmt.Sprintf("prepare_tools cannot add or rename tools: %q is not a registry tool", string(name))
		}
		return entry.err != ""
	})
	return entry
}
