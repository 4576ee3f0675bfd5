package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
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
	// Limits bound each history (loader.DefaultLimits when zero).
	Limits loader.Limits
	// NoSchema skips the JSON Schema validation of histories (the decoder
	// still enforces the same rules).
	NoSchema bool
	// Context is input.context of every step of a history run; a logged
	// decision keeps the context it was logged with.
	Context any
	// Approvals are the approvals of every step of a history run; a
	// logged decision keeps the approvals its input document carries.
	Approvals facts.Approvals
}

// Load reads the runs of the given files and directories (walked in
// lexical order). A file is, after gunzip when gzip-compressed:
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
	if opts.Limits == (loader.Limits{}) {
		opts.Limits = loader.DefaultLimits()
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
		if t := strings.TrimSpace(val); t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
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

func (l *inputLoader) file(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &loader.Error{File: path, Kind: loader.KindIO, Msg: err.Error()}
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err == nil {
			data, err = io.ReadAll(zr)
		}
		if err != nil {
			return &loader.Error{File: path, Kind: loader.KindSyntax, Msg: "gzip: " + err.Error()}
		}
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' && json.Valid(trimmed) {
		return l.array(path, trimmed)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, max(len(data)+1, 64*1024))
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		name := fmt.Sprintf("%s:%d", path, line)
		var err error
		switch {
		case b[0] == '[':
			err = l.history(name, b)
		case b[0] == '{':
			var rec struct {
				Msg   *string         `json:"msg"`
				Level json.RawMessage `json:"level"`
			}
			if json.Unmarshal(b, &rec) == nil && rec.Msg != nil && rec.Level != nil && *rec.Msg != consoleDecisionMsg {
				// serve --log-format json: a record that is not a
				// decision (the startup record, a plugin's message).
				l.skipped++
				continue
			}
			err = l.event(name, "", b)
		case textRecord.Match(b):
			var ev []byte
			if ev, err = textEvent(name, b); err == nil {
				if ev == nil {
					l.skipped++
					continue
				}
				err = l.event(name, "", ev)
			}
		default:
			err = &loader.Error{File: name, Kind: loader.KindSyntax, Msg: "a line must hold a history (a JSON array), a decision-log event (a JSON object) or a record of serve's log"}
		}
		if err != nil {
			return err
		}
	}
	return sc.Err()
}

// array reads a JSON array: a decision-log upload when its first element
// is an object with a decision_id, a history otherwise.
func (l *inputLoader) array(path string, data []byte) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return &loader.Error{File: path, Kind: loader.KindSyntax, Msg: "invalid JSON: " + err.Error()}
	}
	if len(elems) > 0 {
		var probe struct {
			DecisionID *string `json:"decision_id"`
		}
		if json.Unmarshal(elems[0], &probe) == nil && probe.DecisionID != nil {
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
	h, err := loader.DecodeHistory(name, data, l.opts.Limits)
	if err != nil {
		return err
	}
	if !l.opts.NoSchema {
		if err := loader.ValidateHistoryBytes(name, data); err != nil {
			return err
		}
	}
	l.runs = append(l.runs, &Run{ID: name, History: h, Context: l.opts.Context, Approvals: l.opts.Approvals})
	return nil
}

// event reads one decision-log event (ptr is its pointer in the file).
func (l *inputLoader) event(file, ptr string, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var ev struct {
		DecisionID string          `json:"decision_id"`
		Path       string          `json:"path"`
		Input      *map[string]any `json:"input"`
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
	r.Steps = append(r.Steps, Step{Message: int(n) - 1, Facts: f, Context: ctxDoc, Approvals: approvals, Source: where(file, ptr)})
	return nil
}

func where(file, ptr string) string {
	if ptr == "" {
		return file
	}
	return file + "#" + ptr
}
