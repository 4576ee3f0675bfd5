package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// inputFlags are the flags shared by facts, eval and explain.
type inputFlags struct {
	registry   string
	history    string
	context    string
	policies   []string
	noDefaults bool
	maxBytes   int64
	limits     loader.Limits
	noSchema   bool
	approvals  string
	flows      flowFlags
	// transcript keeps the history's transcript as the loader reads it
	// (explain --format html draws its page from it).
	transcript bool
}

func (f *inputFlags) register(cmd *cobra.Command, withPolicy bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.registry, "registry", "", "tool registry (YAML or JSON) (required)")
	fl.StringVar(&f.history, "history", "", "message history, pydantic-ai JSON; - for stdin (required)")
	fl.StringVar(&f.context, "context", "", "input.context for the policies: inline JSON ('{\"group\":\"admin\"}'), a JSON file, or - for stdin")
	def := loader.DefaultReader().Limits
	fl.Int64Var(&f.maxBytes, "max-bytes", def.MaxBytes, "largest history accepted, in bytes")
	fl.IntVar(&f.limits.MaxMessages, "max-messages", def.MaxMessages, "most messages a history may hold")
	fl.IntVar(&f.limits.MaxPartsPerMessage, "max-parts-per-message", def.MaxPartsPerMessage, "most parts one message may hold")
	fl.IntVar(&f.limits.MaxParts, "max-parts", def.MaxParts, "most parts a history may hold")
	fl.IntVar(&f.limits.MaxDepth, "max-depth", def.MaxDepth, "deepest nesting of JSON arrays and objects")
	fl.BoolVar(&f.noSchema, "no-schema", false, "skip JSON Schema validation (the decoder still enforces the same rules)")
	if withPolicy {
		fl.StringArrayVar(&f.policies, "policy", nil, "policy file, directory (data: data.json, data.yaml only; entries named .* not read) or OPA bundle (repeatable)")
		fl.BoolVar(&f.noDefaults, "no-defaults", false, "do not load the shipped default policies")
		f.flows.register(fl)
	}
	_ = cmd.MarkFlagRequired("registry")
	_ = cmd.MarkFlagRequired("history")
}

// registerApprovals adds --approvals (eval and explain).
func (f *inputFlags) registerApprovals(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.approvals, "approvals", "",
		"answers to calls that needed approval: a DeferredToolResults-shaped JSON file, each approval carrying the digest the decision handed out")
}

type inputs struct {
	reg     *facts.Registry
	history facts.History
	// transcript is the history's transcript, when the flags asked for
	// it (explain's page shows its parts).
	transcript *loader.Transcript
	context    any
	approvals  facts.Approvals
}

// request is the engine request for the loaded inputs.
func (in *inputs) request() engine.Request {
	return engine.Request{History: in.history, Context: in.context, Approvals: in.approvals}
}

func readFile(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(cmd.InOrStdin()); err != nil {
			return nil, &loader.Error{File: "<stdin>", Kind: loader.KindIO, Msg: err.Error()}
		}
		return buf.Bytes(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, loader.IOError(path, err)
	}
	return b, nil
}

// load reads and validates registry, history and context: at this
// boundary the history is checked against the JSON Schema as well as by
// the decoder.
func (f *inputFlags) load(cmd *cobra.Command) (*inputs, error) {
	if f.registry == "" || f.history == "" {
		return nil, badInput(errors.New("--registry and --history name files (--history - for stdin); an empty name is not one"))
	}
	if f.maxBytes < 0 {
		return nil, badInput(fmt.Errorf("--max-bytes must be 0 (no limit) or more, not %d", f.maxBytes))
	}
	for _, l := range []struct {
		flag string
		v    int
	}{{"--max-messages", f.limits.MaxMessages}, {"--max-parts-per-message", f.limits.MaxPartsPerMessage},
		{"--max-parts", f.limits.MaxParts}, {"--max-depth", f.limits.MaxDepth}} {
		if l.v < 0 {
			return nil, badInput(fmt.Errorf("%s must be 0 (no limit; for --max-depth the default) or more, not %d", l.flag, l.v))
		}
	}
	if f.history == "-" && f.context == "-" {
		return nil, badInput(errors.New("--history and --context cannot both read standard input"))
	}
	if f.approvals == "-" && (f.history == "-" || f.context == "-") {
		return nil, badInput(errors.New("--approvals cannot read standard input when --history or --context does"))
	}
	reg, err := loader.ReadRegistry(f.registry)
	if err != nil {
		return nil, badInput(err)
	}
	data, err := readFile(cmd, f.history)
	if err != nil {
		return nil, badInput(err)
	}
	name := f.history
	if name == "-" {
		name = "<stdin>"
	}
	lim := f.limits
	lim.MaxBytes = f.maxBytes
	reader := loader.Reader{Limits: lim, Schema: !f.noSchema}
	in := &inputs{reg: reg}
	if f.transcript {
		in.transcript, err = reader.ReadTranscript(name, data)
		if err == nil {
			in.history = in.transcript.History
		}
	} else {
		in.history, err = reader.Read(name, data)
	}
	if err != nil {
		return nil, badInput(historyFormatHint(data, err))
	}
	if f.context != "" {
		if in.context, err = readContext(cmd, f.context, reg); err != nil {
			return nil, err
		}
	}
	if f.approvals != "" {
		raw, err := readFile(cmd, f.approvals)
		if err != nil {
			return nil, badInput(err)
		}
		name := f.approvals
		if name == "-" {
			name = "<stdin>"
		}
		if in.approvals, err = loader.ReadApprovalsFile(name, raw); err != nil {
			return nil, badInput(err)
		}
	}
	return in, nil
}

// readContext reads --context: inline JSON, or a file (- for stdin)
// holding one JSON object, valid under the context_schema of each
// registry of regs that has one.
func readContext(cmd *cobra.Command, path string, regs ...*facts.Registry) (any, error) {
	var raw []byte
	ctxName := path
	if inlineJSON(path) {
		// Inline JSON: an object always starts with "{", which no
		// sensible file name does.
		raw, ctxName = []byte(path), "--context"
	} else {
		var err error
		if raw, err = readFile(cmd, path); err != nil {
			return nil, badInput(err)
		}
		if ctxName == "-" {
			ctxName = "<stdin>"
		}
	}
	// The JSON is checked as the sidecar checks a request's context: by
	// the history's reader, which refuses what encoding/json would read
	// as U+FFFD (invalid UTF-8, a lone surrogate escape).
	end, serr := wire.Skip(ctxName, raw, 0, loader.DefaultMaxDepth)
	if serr != nil {
		return nil, badInput(serr)
	}
	if len(bytes.TrimLeft(raw[end:], " \t\r\n")) > 0 {
		return nil, badInput(&loader.Error{File: ctxName, Kind: loader.KindSyntax, Msg: "invalid JSON: unexpected data after the context object"})
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badInput(&loader.Error{File: ctxName, Kind: loader.KindSyntax, Msg: "invalid JSON: " + err.Error()})
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, badInput(&loader.Error{File: ctxName, Kind: loader.KindSchema, Msg: "the context must be a JSON object"})
	}
	for _, reg := range regs {
		if probs, omitted := reg.ValidateContext(raw); probs != nil {
			ce := &engine.ContextError{Problems: probs, Omitted: omitted}
			return nil, badInput(&loader.Error{File: ctxName, Pointer: ce.Pointer(), Kind: loader.KindSchema, Msg: ce.Detail()})
		}
	}
	return v, nil
}

// loadEngine reads the inputs and compiles the policies against their
// registry: what eval and explain both start with.
func (f *inputFlags) loadEngine(cmd *cobra.Command) (*inputs, *engine.Engine, error) {
	loaded, err := f.load(cmd)
	if err != nil {
		return nil, nil, err
	}
	eng, err := f.engine(cmd, loaded.reg)
	if err != nil {
		return nil, nil, err
	}
	return loaded, eng, nil
}

func (f *inputFlags) engine(cmd *cobra.Command, reg *facts.Registry) (*engine.Engine, error) {
	stderr := cmd.ErrOrStderr()
	opts := []engine.Option{engine.Registry(reg), engine.PolicyPaths(f.policies...),
		engine.OnWarning(func(p engine.PolicyProblem) { fmt.Fprintln(stderr, "policycheck: warning:", p) })}
	if f.noDefaults {
		opts = append(opts, engine.WithoutDefaults())
	}
	flowOpts, err := f.flows.options()
	if err != nil {
		return nil, err
	}
	e, err := engine.New(cmd.Context(), append(opts, flowOpts...)...)
	if err != nil {
		return nil, badInput(err)
	}
	return e, nil
}

func writeJSON(cmd *cobra.Command, v any) error { return writeJSONTo(cmd.OutOrStdout(), v) }

// inlineJSON reports whether a --context value is JSON text rather than a
// file name: it starts, after blanks, with "{".
func inlineJSON(v string) bool {
	return strings.HasPrefix(strings.TrimLeft(v, " \t\r\n"), "{")
}

// messagePointer matches the pointer of a whole history or one message.
var messagePointer = regexp.MustCompile(`^(/[0-9]+)?$`)

// historyFormatHint adds to an error at the top of a history (the
// document, or a message without its "kind") what a history is and where
// the docs show one: such an error usually means the file is not
// pydantic-ai's format at all, an OpenAI-style message list say.
func historyFormatHint(data []byte, err error) error {
	var le *loader.Error
	if !errors.As(err, &le) || le.Kind != loader.KindSchema || !messagePointer.MatchString(le.Pointer) {
		return err
	}
	if le.Pointer != "" && !strings.Contains(le.Msg, `"kind"`) {
		return err
	}
	hint := ""
	if openAIStyle(data) {
		hint = `this looks like an OpenAI-style message list ("role", "content"), not pydantic-ai's; `
	}
	out := *le
	out.Msg = le.Msg + "; " + hint + historyFormatNote
	return &out
}

// openAIStyle reports whether data is a JSON array of objects (or nulls)
// whose first is an object with a "role": an OpenAI-style message list.
// It sniffs the format by wire's skims; the history is read by the loader
// alone.
func openAIStyle(data []byte) bool {
	if !wire.Valid(data, sniffDepth) {
		return false
	}
	elems, _, err := wire.SkimArray("", data, 0, sniffDepth)
	if err != nil || len(elems) == 0 {
		return false
	}
	for _, e := range elems {
		if e[0] != '{' && e[0] != 'n' {
			return false
		}
	}
	env, serr := wire.SkimEnvelope(elems[0], wire.EnvelopeSpec{Known: []string{"role"}, MaxDepth: sniffDepth})
	return serr == nil && env.Members["role"] != nil
}

// sniffDepth bounds the nesting a format sniff reads (as encoding/json's
// own limit did).
const sniffDepth = 10000

const historyFormatNote = `a history is a pydantic-ai ModelMessagesTypeAdapter dump, a JSON list of ` +
	`{"kind": "request"|"response", "parts": [...]} messages (docs/input.md, "The history", shows one)`
