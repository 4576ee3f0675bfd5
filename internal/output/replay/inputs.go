package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// DecisionPath is the path the sidecar's decision-log events name: the
// engine's entrypoint. Events of any other path are refused.
const DecisionPath = "policycheck/availability/decision"

// inputExts are the file names a directory walk reads; other files in a
// directory are not inputs and are skipped (a file named on the command
// line is read whatever its name).
var inputExts = []string{".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz", ".log", ".log.gz"}

// LoadOptions configure Load.
type LoadOptions struct {
	// Reader reads each history: its limits (loader.DefaultLimits when
	// zero) and whether the JSON Schema runs too.
	Reader loader.Reader
	// Context is input.context of every step of a history run; a logged
	// decision keeps the context it was logged with.
	Context any
	// Approvals are the approvals of every step of a history run; a
	// logged decision keeps the approvals its input document carries.
	Approvals facts.Approvals
}

// Load reads the runs of the given files and directories (walked in
// lexical order). A file is read as it arrives, gunzipped as it is read
// when gzip-compressed, no document or line of it over
// opts.Reader.Limits.MaxBytes (see inputLoader.file); it is:
//
//   - a pydantic-ai history (a JSON array of messages): one run named by
//     its path;
//   - a JSON array of decision-log events, as OPA's decision-log plugin
//     uploads them;
//   - JSON Lines: each line a history (a run named PATH:LINE) or a
//     decision-log event;
//   - serve's own log, as it writes it to standard error (--log-format
//     text or json): the records in which OPA's console decision logger
//     wrote an event are read as events, every other record (the startup
//     record, a plugin's message) is skipped and counted in skipped.
//
// Decision-log events are grouped into runs by input.run (the sidecar's
// run id), across files; an event without one (a stateless /v1/decide)
// is a run of its own, named "decision " + its decision_id. Each event is
// a step at message index input.messages - 1. Runs come out sorted by
// name, a run's logged steps by message index (stable).
//
// Errors name the file (PATH:LINE for JSON Lines) and the JSON pointer.
func Load(paths []string, opts LoadOptions) (runs []*Run, skipped int, err error) {
	if opts.Reader.Limits == (loader.Limits{}) {
		opts.Reader.Limits = loader.DefaultReader().Limits
	}
	l := &inputLoader{opts: opts, logged: map[string]*Run{}}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, 0, &loader.Error{File: p, Kind: loader.KindIO, Msg: err.Error()}
		}
		if !st.IsDir() {
			if err := l.file(p); err != nil {
				return nil, 0, err
			}
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && slices.ContainsFunc(inputExts, func(ext string) bool { return strings.HasSuffix(path, ext) }) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, 0, &loader.Error{File: p, Kind: loader.KindIO, Msg: err.Error()}
		}
		for _, f := range files {
			if err := l.file(f); err != nil {
				return nil, 0, err
			}
		}
	}
	for _, r := range l.logged {
		sort.SliceStable(r.Steps, func(i, j int) bool { return r.Steps[i].Message < r.Steps[j].Message })
		l.runs = append(l.runs, r)
	}
	sort.SliceStable(l.runs, func(i, j int) bool { return l.runs[i].ID < l.runs[j].ID })
	for i := 1; i < len(l.runs); i++ {
		if l.runs[i].ID == l.runs[i-1].ID {
			return nil, 0, fmt.Errorf("two runs are named %q: a history and a decision log's run id, or a file given twice", l.runs[i].ID)
		}
	}
	return l.runs, l.skipped, nil
}

type inputLoader struct {
	opts    LoadOptions
	runs    []*Run
	logged  map[string]*Run // decision-log runs by name
	skipped int             // log records that are not decisions
}

// consoleDecisionMsg is the message of the records in which OPA's console
// decision logger writes an event, through serve's logger.
const consoleDecisionMsg = "Decision Log"

// textRecord matches a record of serve's text log (--log-format text,
// key=value pairs: time=... level=... msg=...).
var textRecord = regexp.MustCompile(`^time=\S+ level=\S+ msg=`)

// textEvent reads a record of serve's text log: the decision-log event it
// carries as JSON (its structured values are written as quoted JSON), or
// nil when the record is not a decision.
func textEvent(name string, line []byte) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	msg := ""
	rest := string(line)
	for rest != "" {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil, &loader.Error{File: name, Kind: loader.KindSyntax, Msg: fmt.Sprintf("a record of serve's text log, unreadable at %q", truncate(rest, 40))}
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return nil, &loader.Error{File: name, Kind: loader.KindSyntax, Msg: fmt.Sprintf("a record of serve's text log: the value of %s is not a quoted string", key)}
			}
			val, _ = strconv.Unquote(q)
			after = after[len(q):]
		} else {
			val, after, _ = strings.Cut(after, " ")
			after = " " + after
		}
		if after != "" && after[0] != ' ' {
			return nil, &loader.Error{File: name, Kind: loader.KindSyntax, Msg: fmt.Sprintf("a record of serve's text log: no space after the value of %s", key)}
		}
		rest = strings.TrimLeft(after, " ")
		if key == "msg" {
			msg = val
		}
		if t := strings.TrimSpace(val); t != "" && (t[0] == '{' || t[0] == '[') && wire.Valid([]byte(t), sniffDepth) {
			fields[key] = json.RawMessage(t)
		} else {
			fields[key], _ = json.Marshal(val)
		}
	}
	if msg != consoleDecisionMsg {
		return nil, nil
	}
	return json.Marshal(fields)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// file reads one input file as it arrives, gunzipped when it is gzip
// (gzip's magic bytes, whatever its name): no more than the byte limit
// (opts.Reader.Limits.MaxBytes, --max-bytes) of it is held at once. A JSON
// Lines line over the limit is refused at PATH:LINE, and a document over
// several lines at PATH, as soon as the limit is passed: a gzip bomb
// costs the limit, not what it would decompress to.
//
// Its first line that holds anything says what the file is. A whole JSON
// value is a JSON Lines line; when it is a history array and nothing but
// blank lines follows, the file is that one history, named by its path
// (as a history written on one line is). A line that opens an array and
// does not close it begins a document over several lines, read whole.
func (l *inputLoader) file(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &loader.Error{File: path, Kind: loader.KindIO, Msg: err.Error()}
	}
	defer f.Close()
	lr, err := newLineReader(path, f, l.opts.Reader.Limits.MaxBytes)
	if err != nil {
		return err
	}
	var first []byte
	firstNo := 0
	for first == nil {
		b, err := lr.next()
		if err == io.EOF {
			return nil // nothing but blank lines
		}
		if err != nil {
			return err
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			first, firstNo = t, lr.line
		}
	}
	if first[0] == '[' && !wire.Valid(first, sniffDepth) {
		data, err := lr.rest(first)
		if err != nil {
			return err
		}
		if trimmed := bytes.TrimSpace(data); wire.Valid(trimmed, sniffDepth) {
			return l.array(path, trimmed)
		}
		return l.line(path, firstNo, first) // not a document: the line's error
	}
	for {
		b, err := lr.next()
		if err == io.EOF {
			if first == nil {
				return nil
			}
			if first[0] == '[' {
				return l.array(path, first)
			}
			return l.line(path, firstNo, first)
		}
		if err != nil {
			return err
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		if first != nil {
			if err := l.line(path, firstNo, first); err != nil {
				return err
			}
			first = nil
		}
		if err := l.line(path, lr.line, b); err != nil {
			return err
		}
	}
}

// line reads one JSON Lines line (trimmed, not empty): a history, a
// decision-log event, or a record of serve's own log (text or JSON), of
// which those that are not decisions are skipped and counted.
func (l *inputLoader) line(path string, n int, b []byte) error {
	name := fmt.Sprintf("%s:%d", path, n)
	switch {
	case b[0] == '[':
		return l.history(name, b)
	case b[0] == '{':
		if msg, ok := logRecordMsg(b); ok && msg != consoleDecisionMsg {
			// serve --log-format json: a record that is not a
			// decision (the startup record, a plugin's message).
			l.skipped++
			return nil
		}
		return l.event(name, "", b)
	case textRecord.Match(b):
		ev, err := textEvent(name, b)
		if err != nil {
			return err
		}
		if ev == nil {
			l.skipped++
			return nil
		}
		return l.event(name, "", ev)
	}
	return &loader.Error{File: name, Kind: loader.KindSyntax, Msg: "a line must hold a history (a JSON array), a decision-log event (a JSON object) or a record of serve's log"}
}

// lineReader reads a file's lines, gunzipped as they are read, none
// longer than limit bytes (0: no limit).
type lineReader struct {
	path  string
	br    *bufio.Reader
	gz    bool
	limit int64
	line  int // the number of the line next returned last
}

func newLineReader(path string, f io.Reader, limit int64) (*lineReader, error) {
	lr := &lineReader{path: path, limit: limit}
	raw := bufio.NewReaderSize(f, 64<<10)
	var src io.Reader = raw
	if magic, _ := raw.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		lr.gz = true
		zr, err := gzip.NewReader(raw)
		if err != nil {
			return nil, lr.readError(err)
		}
		src = zr
	}
	lr.br = bufio.NewReaderSize(src, 64<<10)
	return lr, nil
}

// next returns the next line, without its line feed, in a slice of its
// own (a blank line may come back empty); io.EOF after the last.
func (lr *lineReader) next() ([]byte, error) {
	var buf []byte
	for {
		frag, err := lr.br.ReadSlice('\n')
		n := len(buf) + len(frag)
		if err == nil {
			n-- // the line feed
		}
		if lr.limit > 0 && int64(n) > lr.limit {
			return nil, &loader.Error{File: fmt.Sprintf("%s:%d", lr.path, lr.line+1), Kind: loader.KindLimit,
				Msg: fmt.Sprintf("the line is over the limit of %d bytes (--max-bytes)", lr.limit)}
		}
		if buf == nil && err == nil && len(bytes.TrimSpace(frag)) == 0 {
			lr.line++
			return frag[:0], nil // a blank line: nothing to keep
		}
		buf = append(buf, frag...)
		switch err {
		case nil:
			lr.line++
			return buf[:len(buf)-1], nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(buf) == 0 {
				return nil, io.EOF
			}
			lr.line++
			return buf, nil
		}
		return nil, lr.readError(err)
	}
}

// rest returns first, a line feed and the rest of the file: a document
// over several lines whose first line is first (and, with the line feed,
// counts towards the limit).
func (lr *lineReader) rest(first []byte) ([]byte, error) {
	budget := lr.limit - int64(len(first)) - 1
	src := io.Reader(lr.br)
	if lr.limit > 0 {
		src = io.LimitReader(lr.br, max(budget, 0)+1)
	}
	buf := bytes.NewBuffer(append(append(make([]byte, 0, len(first)+1+64<<10), first...), '\n'))
	n, err := buf.ReadFrom(src)
	if err != nil {
		return nil, lr.readError(err)
	}
	if lr.limit > 0 && n > budget {
		return nil, &loader.Error{File: lr.path, Kind: loader.KindLimit,
			Msg: fmt.Sprintf("the document is over the limit of %d bytes (--max-bytes)", lr.limit)}
	}
	return buf.Bytes(), nil
}

func (lr *lineReader) readError(err error) error {
	if lr.gz {
		return &loader.Error{File: lr.path, Kind: loader.KindSyntax, Msg: "gzip: " + err.Error()}
	}
	return &loader.Error{File: lr.path, Kind: loader.KindIO, Msg: err.Error()}
}

// sniffDepth bounds the nesting of what the format sniffing reads (as
// encoding/json's own limit did); the reader of each kind of document
// applies its own limits after.
const sniffDepth = 10000

// logRecordMsg reads what a line of serve --log-format json says: its
// msg, when the line is a JSON object with a string msg and a level.
func logRecordMsg(b []byte) (string, bool) {
	env, err := wire.SkimEnvelope(b, wire.EnvelopeSpec{Known: []string{"msg", "level"}, MaxDepth: sniffDepth})
	if err != nil {
		return "", false
	}
	msg, hasLevel := env.Members["msg"], env.Members["level"] != nil
	if len(msg) == 0 || msg[0] != '"' || !hasLevel {
		return "", false
	}
	return wire.Unescape(msg), true
}

// array reads a JSON array (data holds one, checked): a decision-log
// upload when its first element is an object with a string decision_id,
// a history otherwise, which the loader reads.
func (l *inputLoader) array(path string, data []byte) error {
	elems, _, err := wire.SkimArray(path, data, 0, sniffDepth)
	if err != nil {
		return err
	}
	if len(elems) > 0 {
		var id []byte
		if env, err := wire.SkimEnvelope(elems[0], wire.EnvelopeSpec{Known: []string{"decision_id"}, MaxDepth: sniffDepth}); err == nil {
			id = env.Members["decision_id"]
		}
		if len(id) > 0 && id[0] == '"' {
			for i, e := range elems {
				if err := l.event(path, fmt.Sprintf("/%d", i), e); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return l.history(path, data)
}

func (l *inputLoader) history(name string, data []byte) error {
	h, err := l.opts.Reader.Read(name, data)
	if err != nil {
		return err
	}
	l.runs = append(l.runs, &Run{ID: name, History: h, Context: l.opts.Context, Approvals: l.opts.Approvals})
	return nil
}

// event reads one decision-log event (ptr is its pointer in the file).
func (l *inputLoader) event(file, ptr string, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var ev struct {
		DecisionID string                     `json:"decision_id"`
		Path       string                     `json:"path"`
		Input      *map[string]any            `json:"input"`
		Timestamp  string                     `json:"timestamp"`
		Result     json.RawMessage            `json:"result"`
		Custom     map[string]json.RawMessage `json:"custom"`
	}
	if err := dec.Decode(&ev); err != nil {
		return &loader.Error{File: file, Pointer: ptr, Kind: loader.KindSyntax, Msg: "invalid decision-log event: " + err.Error()}
	}
	if ev.DecisionID == "" {
		return &loader.Error{File: file, Pointer: ptr + "/decision_id", Kind: loader.KindSchema, Msg: "a decision-log event needs a decision_id"}
	}
	if ev.Path != DecisionPath {
		return &loader.Error{File: file, Pointer: ptr + "/path", Kind: loader.KindSchema, Msg: fmt.Sprintf("the event's path is %q, not the sidecar's %q", ev.Path, DecisionPath)}
	}
	if ev.Input == nil {
		return &loader.Error{File: file, Pointer: ptr + "/input", Kind: loader.KindSchema, Msg: "the event carries no input (erased by a mask rule?): it cannot be decided again"}
	}
	in := *ev.Input
	f, ctxDoc, approvals, err := engine.FactsFromInput(in)
	if err != nil {
		return &loader.Error{File: file, Pointer: ptr + "/input", Kind: loader.KindSchema, Msg: err.Error() + " (a log written before the event carried the input document cannot be replayed)"}
	}
	msgs, _ := in["messages"].(json.Number)
	n, err := msgs.Int64()
	if err != nil || n < 1 {
		return &loader.Error{File: file, Pointer: ptr + "/input/messages", Kind: loader.KindSchema, Msg: "want the number of messages decided on (1 or more)"}
	}
	name := "decision " + ev.DecisionID
	if id, ok := in["run"].(string); ok && id != "" {
		name = id
	}
	r := l.logged[name]
	if r == nil {
		r = &Run{ID: name}
		l.logged[name] = r
	}
	rec, err := readRecorded(ev.DecisionID, in, ev.Timestamp, ev.Result, ev.Custom)
	if err != nil {
		var le *loader.Error
		if errors.As(err, &le) {
			le.File, le.Pointer = file, ptr+le.Pointer
		}
		return err
	}
	r.Steps = append(r.Steps, Step{Message: int(n) - 1, Facts: f, Context: ctxDoc, Approvals: approvals, Source: where(file, ptr), Recorded: rec})
	return nil
}

func where(file, ptr string) string {
	if ptr == "" {
		return file
	}
	return file + "#" + ptr
}
