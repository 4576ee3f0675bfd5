package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/jsonout"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server/internal/httpreq"
)

// intake is the sidecar's one way in for a request. It owns:
//
//   - the body: read under a deadline (a client that drips its bytes is
//     cut off), bounded by MaxBody, and grown as bytes arrive rather than
//     allocated from what a Content-Length merely declares (beyond its
//     first 2 MiB); a gzip body (Content-Encoding: gzip) is read
//     decompressed, MaxBody bounding what it decompresses to, and any
//     other encoding refused, as is a Content-Type other than JSON's
//     (server/internal/httpreq reads those headers);
//   - the scan: one pass over the envelope (wire.SkimEnvelope, at the
//     end of this file), which keeps the
//     bytes of the members a handler reads and of each history message;
//   - the decode, in that same pass: the scan hands the history array to
//     the loader's decoder (loader.DecodeArray), the one runtime validator
//     (it rejects everything the JSON Schema rejects), which reads it on
//     several cores when it is large (see workers) and says where it ends.
//     A history the decoder refuses is scanned, then decoded again alone,
//     so that its error is DecodeHistory's. The schema runs as well only
//     with Config.Schema;
//   - the resume from a known prefix: the prefix cache (prefix.go) is the
//     server's one mechanism for skipping bytes it has seen. A stateless
//     client resending its growing history has only its new messages
//     decoded; the run endpoint's clients send only those to begin with.
//     A history decoded whole is kept from its second sight (see
//     prefixCache.admit).
//
// A stateless request's body of 64 KiB to 16 MiB is read into pooled
// buffers and reused once its answer is written (see minPooled), unless
// the request marked it kept: the prefix cache keeps a slice of a
// history it admits, and the decoded history's arguments alias it. Run
// bodies are never pooled (a run keeps its messages), and no body is
// when a decision log or a shadow policy may read a request after its
// answer. Safe for concurrent use.
type intake struct {
	maxBody     int64
	bodyTimeout time.Duration
	reader      loader.Reader // the limits and the schema switch (see loader.Reader)
	prefixes    *prefixCache  // nil when off
	minPiece    int           // the least bytes of a decode's piece; 0: pieceBytes (tests set it)

	// recycle is set when nothing outlives a request but what the intake
	// itself keeps: no decision log and no shadow policy (their workers
	// read a decision's context after its response). bodies then hold
	// the bodies the intake may read again (see pooled); poison (tests)
	// overwrites a body before it is reused.
	recycle bool
	poison  bool
	bodies  *bodyPool
	// reused counts the bodies given back; misreused (poison only) those
	// the prefix cache still held when given back.
	reused, misreused atomic.Int64

	// large counts the requests in flight whose body is at least
	// largeBody (see release).
	large atomic.Int64

	// schemaChecks counts the documents (whole histories or batches of
	// new messages) validated against the JSON Schema.
	schemaChecks atomic.Int64
}

// A body is read into one buffer that doubles as bytes arrive, up to
// the declared length, or moves to one for the whole declared length
// once a quarter of it has arrived. It starts at the declared length up
// to upFront (so a body of up to 2 MiB is read with no copy: growing a
// megabyte buffer from 64 KiB cost a never-seen 1,000-message request a
// fifth of its time, BENCHMARKS.md), or at unknownFirst when no length
// is declared. A pooled body starts in a buffer for the whole of it when
// the pool holds one: that costs no new memory. A client that declares
// more than it sends costs at most upFront of new memory until the body
// deadline cuts it off, and one that sends more, at most four times what
// it sent.
const (
	upFront      = 2 << 20
	unknownFirst = 64 << 10
)

// A body whose declared length is from minPooled to maxPooled bytes is
// read into buffers that earlier requests' bodies used: one of
// bodyClasses sizes, each a power of two. It starts in the class of its
// whole length when the pool holds such a buffer; otherwise in the class
// of its length up to upFront and, like any body, moves to a buffer twice
// as large only as its bytes arrive (the smaller one goes back to its
// class). Once its request is answered, a body nothing has kept (see
// keepBody) goes back to its class. A history of a megabyte then costs
// no new memory to read: on a machine where fresh pages are dear, its
// zeroing, its page faults and the collections it brought were more than
// half of a growing request's time (BENCHMARKS.md). Bodies of largeBody
// and more are not pooled: their memory is handed back (see release).
const (
	minPooled   = 64 << 10
	maxPooled   = largeBody
	bodyClasses = 9 // 64 KiB to 16 MiB
)

// bodyClass is the class of a buffer of n bytes (minPooled <= n <=
// maxPooled): the smallest whose size is n or more.
func bodyClass(n int) int {
	k := 0
	for minPooled<<k < n {
		k++
	}
	return k
}

// bodyUse travels in a pooled request's context: keepBody marks the body
// as kept beyond the request (the prefix cache holds it, or a value that
// aliases it may outlive the answer), and the body is then not reused.
type bodyUse struct{ kept bool }

type bodyUseKey struct{}

// keepBody marks the request's body as kept (a no-op when it is not
// pooled).
func keepBody(ctx context.Context) {
	if u, ok := ctx.Value(bodyUseKey{}).(*bodyUse); ok {
		u.kept = true
	}
}

// getBuf returns an empty pooled buffer of at least n bytes (n <=
// maxPooled).
func (in *intake) getBuf(n int64) []byte {
	k := bodyClass(int(n))
	if b := in.bodies.get(k); b != nil {
		return b
	}
	return make([]byte, 0, minPooled<<k)
}

// putBuf gives a buffer getBuf returned back to its class; with poison,
// it is overwritten first.
func (in *intake) putBuf(buf []byte) {
	b := buf[:cap(buf)]
	if in.poison {
		for i := range b {
			b[i] = '#'
		}
	}
	in.bodies.put(bodyClass(len(b)), b)
}

// reuse gives a pooled body back once its request is answered.
func (in *intake) reuse(body []byte) {
	if in.poison && in.prefixes != nil && in.prefixes.holds(body[:cap(body)]) {
		in.misreused.Add(1)
	}
	in.reused.Add(1)
	in.putBuf(body)
}

// read reads r's body. A body over maxBody is refused (413) as soon as
// that is known; a body still arriving after bodyTimeout is refused (408)
// and the connection closed. A body sent with Content-Encoding: gzip is
// read decompressed (maxBody bounds both what arrives and what it
// decompresses to); any other encoding is refused (415). With pool, the
// body may be read into a pooled buffer (pooled reports it); the caller
// gives it back with reuse.
func (in *intake) read(w http.ResponseWriter, r *http.Request, pool bool) (body []byte, pooled bool, herr *Error) {
	if no := httpreq.JSONBody(r.Header); no != nil {
		return nil, false, &Error{Status: http.StatusUnsupportedMediaType, Code: CodeMediaType, Message: no.Msg}
	}
	gz, no := httpreq.Gzipped(r.Header)
	if no != nil {
		return nil, false, &Error{Status: http.StatusUnsupportedMediaType, Code: CodeEncoding, Message: no.Msg}
	}
	if r.ContentLength > in.maxBody {
		return nil, false, tooLarge(in.maxBody)
	}
	if in.bodyTimeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(in.bodyTimeout)) == nil {
			defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
		}
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, in.maxBody)
	declared := r.ContentLength
	if gz {
		// The decompressed length is not declared: the body is read as
		// one of unknown length, one byte past maxBody at most.
		zr, err := httpreq.Gunzip(src)
		if err != nil {
			return nil, false, in.readError(w, err)
		}
		src, declared, pool = io.LimitReader(zr, in.maxBody+1), -1, false
	}
	limit := in.maxBody + 1 // room to see that a body of unknown length is over
	first := int64(unknownFirst)
	if declared >= 0 {
		limit, first = declared, upFront
	}
	var buf []byte
	if pooled = pool && in.recycle && declared >= minPooled && declared <= maxPooled; pooled {
		// A buffer the pool holds costs no new memory: one for the whole
		// declared body is taken at once, when there is one, rather than
		// grown into through smaller ones and their copies.
		if limit > first {
			buf = in.bodies.get(bodyClass(int(limit)))
		}
		if buf == nil {
			buf = in.getBuf(min(limit, first))
		}
	} else {
		buf = make([]byte, 0, min(limit, first))
	}
	// An error gives a pooled buffer back at once: nothing read it.
	fail := func(herr *Error) ([]byte, bool, *Error) {
		if pooled {
			in.putBuf(buf)
		}
		return nil, false, herr
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				// Full: only the end of the body may follow.
				var one [1]byte
				n, err := src.Read(one[:])
				if n > 0 {
					err = errors.New("the body is longer than its Content-Length")
				}
				if err == io.EOF {
					if int64(len(buf)) > in.maxBody { // decompressed past it
						return fail(tooLarge(in.maxBody))
					}
					return buf, pooled, nil
				}
				if err == nil {
					continue
				}
				return fail(in.readError(w, err))
			}
			// Twice as large, or the whole declared body once a quarter
			// of it is here: a 10 MB body then moves through 2 and 4 MiB
			// and skips the copy into 8.
			want := min(2*int64(cap(buf)), limit)
			if declared >= 0 && 4*int64(len(buf)) >= limit {
				want = limit
			}
			var next []byte
			if pooled {
				next = in.getBuf(want)[:len(buf)]
			} else {
				next = make([]byte, len(buf), want)
			}
			copy(next, buf)
			if pooled {
				in.putBuf(buf)
			}
			buf = next
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			// A gzip reader may hand over its last bytes with io.EOF:
			// the byte past the limit can arrive with the end.
			if int64(len(buf)) > in.maxBody {
				return fail(tooLarge(in.maxBody))
			}
			return buf, pooled, nil
		}
		if err != nil {
			return fail(in.readError(w, err))
		}
	}
}

func (in *intake) readError(w http.ResponseWriter, err error) *Error {
	var mbe *http.MaxBytesError
	var ie *httpreq.InflateError
	switch {
	case errors.As(err, &mbe):
		return tooLarge(in.maxBody)
	case errors.As(err, &ie):
		return badRequest(CodeSyntax, "the body is sent with Content-Encoding: gzip but does not decompress: "+ie.Err.Error(), "")
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return &Error{Status: http.StatusRequestTimeout, Code: CodeBodyTimeout,
			Message: "the body did not arrive within " + in.bodyTimeout.String()}
	}
	return badRequest(CodeSyntax, "reading the body: "+err.Error(), "")
}

func tooLarge(max int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeLimit,
		Message: "the body is over the limit of " + strconv.FormatInt(max, 10) + " bytes"}
}

// largeBody is the body size from which a request's memory is handed
// back to the operating system once it is answered (see release).
const largeBody = 16 << 20

// hold notes a request whose body is n bytes; release must follow.
func (in *intake) hold(n int) {
	if n >= largeBody {
		in.large.Add(1)
	}
}

// release ends a request hold noted. When it ends the last large request
// in flight, the memory it used is collected and returned to the
// operating system now: without allocation, Go's collector would not run
// for minutes, and a server that answered a few requests of 60 MB would
// keep their pages until then. That costs one collection per burst of
// large requests, after their responses are written.
func (in *intake) release(n int) {
	if n >= largeBody && in.large.Add(-1) == 0 {
		debug.FreeOSMemory()
	}
}

// history is the history of a stateless request: decoded whole, or, when
// it resumed after a remembered prefix, only the facts of the whole.
type history struct {
	messages facts.History // nil when facts is set
	facts    *facts.Facts
	count    int
	keptBody bool // the prefix cache keeps the body's bytes
}

// The members of a stateless request's body, and the one whose elements
// the envelope keeps (package variables: the skim's spec does not let a
// list given to it stay on the stack).
var (
	statelessMembers = []string{"registry", "history", "context", "approvals"}
	statelessArrays  = []string{"history"}
)

// stateless scans a /v1/decide, /v1/facts or /v1/explain body and decodes
// its history; engineFor picks the engine from the registry member. With
// resume, a history that begins with a remembered prefix resumes from it
// (explanations, which need every message, do not ask).
func (in *intake) stateless(body []byte, resume bool, engineFor func(registry []byte) (*engine.Engine, *Error)) (*wire.Envelope, *engine.Engine, *history, *Error) {
	var hit *prefixEntry
	// decoded is the last history array the scan decoded; an array that
	// resumed, or did not decode, leaves it nil.
	var decoded *loader.Array
	hooks := arrayHooks{decode: func(b []byte) ([][]byte, int) {
		a, err := loader.DecodeArray("request", b, in.reader.Limits, in.workers(len(b)))
		if err != nil {
			decoded = nil
			return nil, 0
		}
		decoded = &a
		return a.Elements, a.End
	}}
	if resume && in.prefixes != nil {
		hooks.resume = func(arr []byte) int {
			decoded = nil
			if hit = in.prefixes.find(arr); hit == nil {
				return 0
			}
			return len(hit.hist)
		}
	}
	known := statelessMembers
	env, herr := scanEnvelopeWith(body, known, hooks, statelessArrays...)
	if herr == nil {
		herr = refuseUnknown(env, known)
	}
	if herr != nil {
		return nil, nil, nil, herr
	}
	raw := env.Members["history"]
	if isNull(raw) {
		return nil, nil, nil, badRequest(CodeSchema, "history is required (a JSON array of messages)", "/history")
	}
	eng, herr := engineFor(env.Members["registry"])
	if herr != nil {
		return nil, nil, nil, herr
	}
	if hit != nil && env.ResumedN > 0 {
		if h := in.resume(hit, env, body, eng.Registry(), eng.FactOptions()); h != nil {
			in.prefixes.hits.Add(1)
			return env, eng, h, nil
		}
		// Anything unusual in the new messages (an error to report, a
		// limit, a concurrent request that took the prefix): the whole
		// history is decoded, and errors reported, as without the cache.
		in.prefixes.fallbacks.Add(1)
		hooks.resume = nil
		env, herr = scanEnvelopeWith(body, known, hooks, statelessArrays...)
		if herr != nil {
			return nil, nil, nil, herr
		}
		raw = env.Members["history"]
	}
	var h facts.History
	// The envelope keeps elements only when the last history member is
	// an array: an earlier one's decode does not stand for a later string.
	if _, isArray := env.Elements["history"]; isArray && decoded != nil {
		h = decoded.Messages
	} else {
		// Not an array, or one the decoder refused: its error, as the
		// decoder gives it for the member alone.
		var err error
		if h, err = loader.DecodeHistory("request", raw, in.reader.Limits); err != nil {
			return nil, nil, nil, fromLoader(err, "/history")
		}
	}
	if in.reader.Schema {
		in.schemaChecks.Add(1)
		if err := in.reader.CheckSchema("request", raw); err != nil {
			return nil, nil, nil, fromLoader(err, "/history")
		}
	}
	if pc := in.prefixes; pc != nil && len(h) > 0 {
		if resume {
			pc.misses.Add(1)
		}
		if !pc.admit(env.Elements["history"]) {
			return env, eng, &history{messages: h, count: len(h)}, nil
		}
		parts := 0
		for i := range h {
			parts += len(h[i].Parts)
		}
		e := newPrefixEntry(pc.hash.key(env.Elements["history"][0]), body[env.ArrStart:env.LastEnd])
		e.count, e.parts, e.reg, e.history = len(h), parts, eng.Registry(), h
		pc.put(e)
		return env, eng, &history{messages: h, count: len(h), keptBody: true}, nil
	}
	return env, eng, &history{messages: h, count: len(h)}, nil
}

// pieceBytes is the least history a goroutine of a concurrent decode
// reads (see workers): below it, a goroutine costs more than it saves.
const pieceBytes = 256 << 10

// workers is how many goroutines decode a history array at the start of
// n bytes of body: a never-seen history's decode is most of its request's
// time, and a request of one client leaves the other cores idle. No more
// than GOMAXPROCS, each with pieceBytes or more.
func (in *intake) workers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), n/in.pieceBytes()))
}

func (in *intake) pieceBytes() int {
	if in.minPiece > 0 {
		return in.minPiece
	}
	return pieceBytes
}

// resume finishes a history that began with the remembered prefix hit:
// it decodes (and, with the schema on, validates) only the messages after
// the prefix, extends the prefix's facts with them and remembers the
// longer prefix, with the optional facts opts asks for. It returns nil, leaving the cache as it was, when the
// whole history must be decoded instead: the registry differs, a new
// message is invalid, a limit is reached, or another request took the
// prefix first.
func (in *intake) resume(hit *prefixEntry, env *wire.Envelope, body []byte, reg *facts.Registry, opts facts.Options) *history {
	if hit.reg != reg || hit.tracker != nil && hit.tracker.Options() != opts {
		// Another registry, or policies that read optional facts the
		// prefix's tracker does not keep.
		return nil
	}
	lim := in.reader.Limits
	elems := env.Elements["history"]
	total := hit.count + len(elems)
	if (lim.MaxMessages > 0 && total > lim.MaxMessages) ||
		(lim.MaxBytes > 0 && int64(len(env.Members["history"])) > lim.MaxBytes) {
		return nil
	}
	var msgs []facts.Message
	parts := hit.parts
	if len(elems) > 0 {
		batch := jsonout.JoinArray(elems)
		blim := lim
		blim.MaxBytes, blim.MaxMessages, blim.MaxParts = 0, 0, 0
		var err error
		if msgs, err = loader.DecodeMessages("request", batch, hit.count, blim); err != nil || len(msgs) != len(elems) {
			return nil
		}
		for i := range msgs {
			parts += len(msgs[i].Parts)
		}
		if lim.MaxParts > 0 && parts > lim.MaxParts {
			return nil
		}
		if in.reader.Schema {
			in.schemaChecks.Add(1)
			if in.reader.CheckSchema("request", batch) != nil {
				return nil
			}
		}
	}
	if !in.prefixes.take(hit) {
		return nil
	}
	tr := hit.tracker
	if tr == nil {
		tr = facts.NewTracker(reg, opts)
		tr.Append(hit.history...)
	}
	tr.Append(msgs...)
	f := tr.FactsWith(opts)
	// A new entry even for the same bytes: requests that found hit but
	// lost the race to take it still read its fields.
	next := newPrefixEntry(hit.first, hit.hist)
	next.owned = hit.owned
	if len(elems) > 0 {
		// The cache's own copy of the bytes, grown in place when it has
		// room (readers of hit only read below its length).
		tail := body[env.ArrStart+len(hit.hist) : env.LastEnd]
		if hit.owned && cap(hit.hist)-len(hit.hist) >= len(tail) {
			next.hist = append(hit.hist, tail...)
		} else {
			n := len(hit.hist) + len(tail)
			buf := make([]byte, 0, n+n/2)
			next.hist = append(append(buf, hit.hist...), tail...)
		}
		next.owned = true
	}
	next.count, next.parts, next.reg, next.tracker, next.history = total, parts, reg, tr, nil
	in.prefixes.put(next)
	return &history{facts: &f, count: total}
}

// appended decodes the messages a run request appends to a run that holds
// offset messages. Error pointers point into the request's messages array
// (Pointer) and into the run's whole history (HistoryPointer); so does a
// run that would grow past the message limit, at the first message past
// it.
func (in *intake) appended(raw []byte, elems [][]byte, offset int) ([]facts.Message, *Error) {
	lim := in.reader.Limits
	if lim.MaxMessages > 0 && offset+len(elems) > lim.MaxMessages {
		at := max(lim.MaxMessages-offset, 0)
		e := &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeLimit,
			Message: "the run would hold " + strconv.Itoa(offset+len(elems)) + " messages, over the limit of " + strconv.Itoa(lim.MaxMessages),
			Pointer: "/messages/" + strconv.Itoa(at), HistoryPointer: "/" + strconv.Itoa(offset+at)}
		return nil, e
	}
	lim.MaxMessages = 0
	msgs, err := loader.DecodeMessages("request", raw, 0, lim)
	if err == nil && in.reader.Schema {
		in.schemaChecks.Add(1)
		err = in.reader.CheckSchema("request", raw)
	}
	if err != nil {
		e := fromLoader(err, "")
		e.HistoryPointer = shiftPointer(e.Pointer, -offset)
		e.Pointer = "/messages" + e.Pointer
		return nil, e
	}
	return msgs, nil
}

// runSize is what a run's history weighs against the limits of a whole
// history (loader.Limits): its parts, and its bytes as one compact
// array of the messages as they were sent ("[m0,...,mk]": each message's
// bytes and one separator, plus the opening bracket).
type runSize struct {
	parts int
	bytes int64 // the messages' bytes and a separator each; 0 when empty
}

// grown is the size of a run of size held and offset messages once the
// messages msgs (elems their bytes) are appended, or a 413 when the
// whole history would then be over MaxParts or MaxBytes, as /v1/decide
// answers for that history: a step's batch is under them (appended),
// but the run holds every step's. Pointers as for MaxMessages, at the
// first message past the limit.
func (in *intake) grown(held runSize, elems [][]byte, msgs []facts.Message, offset int) (runSize, *Error) {
	lim := in.reader.Limits
	if len(elems) != len(msgs) { // the envelope's elements are the messages decoded: not reached
		return held, &Error{Status: http.StatusInternalServerError, Code: CodeInternal,
			Message: "the run's messages were read as " + strconv.Itoa(len(elems)) + " and decoded as " + strconv.Itoa(len(msgs))}
	}
	next := held
	for i := range msgs {
		next.parts += len(msgs[i].Parts)
		next.bytes += int64(len(elems[i])) + 1
		what := ""
		switch {
		case lim.MaxParts > 0 && next.parts > lim.MaxParts:
			what = strconv.Itoa(next.parts) + " parts, over the limit of " + strconv.Itoa(lim.MaxParts)
		case lim.MaxBytes > 0 && 1+next.bytes > lim.MaxBytes:
			what = strconv.FormatInt(1+next.bytes, 10) + " bytes, over the limit of " + strconv.FormatInt(lim.MaxBytes, 10)
		}
		if what != "" {
			return held, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeLimit,
				Message: "the run would hold " + what + " (its whole history is held to the limits of one)",
				Pointer: "/messages/" + strconv.Itoa(i), HistoryPointer: "/" + strconv.Itoa(offset+i)}
		}
	}
	return next, nil
}

// A request body holds a history of a megabyte or more; decoding it with
// encoding/json before the history decoder reads it again would double
// the cost of every request. The envelope is read once by wire's skim
// (wire.SkimEnvelope), which checks that the body is well-formed JSON
// (each member strictly, the history by the decoder) and returns the
// bytes of the members the handler wants, and the bytes of each element
// of the array members (the messages), which the prefix cache
// (intake.go) resumes after. With arrayHooks the caller reads those
// arrays itself: the history decoder then reads each message's bytes
// once, in the skim.

// arrayHooks let the caller read the kept arrays itself (see
// wire.EnvelopeSpec's Resume and Decode).
type arrayHooks struct {
	resume func(arr []byte) int
	decode func(arr []byte) (elems [][]byte, n int)
}

// scanEnvelope checks that body is one well-formed JSON object and
// returns its members named in known (the last of duplicates wins, as
// with encoding/json); arrays names the members whose elements it keeps.
// The elements of those members are only skimmed: the caller must decode
// them strictly (the history decoder does).
func scanEnvelope(body []byte, known []string, arrays ...string) (*wire.Envelope, *Error) {
	return scanEnvelopeWith(body, known, arrayHooks{}, arrays...)
}

// scanEnvelopeWith is scanEnvelope with hooks that read the kept arrays
// (see arrayHooks): the elements of a skipped prefix are not in the
// envelope's elements. A member's value nests at most
// loader.DefaultMaxDepth deep, as a history's values do.
func scanEnvelopeWith(body []byte, known []string, hooks arrayHooks, arrays ...string) (*wire.Envelope, *Error) {
	env, err := wire.SkimEnvelope(body, wire.EnvelopeSpec{File: "request", Known: known, Arrays: arrays,
		MaxDepth: loader.DefaultMaxDepth, Resume: hooks.resume, Decode: hooks.decode})
	if err != nil {
		return nil, envelopeError(err)
	}
	return env, nil
}

// envelopeError is a body the envelope skim refused, as a 400: its byte
// offset and what was found there, or that the body is no object.
func envelopeError(e *wire.Error) *Error {
	if e.Kind == wire.KindSchema {
		return badRequest(CodeSyntax, "the body "+e.Msg, "")
	}
	return badRequest(CodeSyntax, "invalid JSON at byte "+strconv.Itoa(e.Offset)+": "+strings.TrimPrefix(e.Msg, "invalid JSON: "), e.Pointer)
}

// refuseUnknown refuses a body that has a member other than known, the
// members the endpoint reads, naming the first: a misspelt "context"
// would otherwise read as no context at all, and a deny rule that looks
// at the context would let the call through.
func refuseUnknown(env *wire.Envelope, known []string) *Error {
	if len(env.Unknown) == 0 {
		return nil
	}
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = strconv.Quote(k)
	}
	key := env.Unknown[0]
	return badRequest(CodeSchema, strconv.Quote(key)+" is not a member this endpoint reads: it reads "+strings.Join(names, ", "),
		"/"+wire.PointerToken(key))
}
