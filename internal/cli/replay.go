package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/output/render"
	"github.com/policycheck/policycheck/internal/output/replay"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

func newReplayCmd() *cobra.Command {
	var (
		registry, candRegistry string
		ctxPath, format        string
		baseline, candidate    []string
		failOn                 []string
		noDefaults, noSchema   bool
		approvalsPath          string
		workers                int
		maxBytes               int64
		rf                     receiptFlags
		receiptKeysFrom        string
		ak                     = approverKeysFlag{maxTTL: trust.DefaultMaxTTL} // no --approval-max-ttl: eval's default bound
		flows                  flowFlags
	)
	cmd := &cobra.Command{
		Use:   "replay --registry R --baseline P... --candidate P... [--candidate-registry R2] [--context C] [--approvals A] [--receipt-keys JWKS] [--approver-keys JWKS] [--format pretty|json|html|junit] [--fail-on T,...] INPUT...",
		Short: "Decide recorded runs with a baseline and a candidate policy set, and report what changes",
		Long: `replay decides every step of every recorded run with two policy sets and reports where they differ.

INPUT is a pydantic-ai history, a directory (walked for *.json, *.jsonl, *.ndjson, *.log, and their
.gz forms), a JSON Lines file of histories, or the sidecar's decision log (OPA's uploaded JSON arrays,
gzip or not, or serve's own log with OPA's console decision logger on, --log-format text or json, as
serve writes it: records that are not decisions are skipped and counted on stderr). A history is replayed as the run that produced it: each prefix that
ends with a request decides availability and advertisement, each that ends with a response judges its
calls. A decision-log event is decided again from the input document it carries; its run is the
sidecar's run id, its step the number of messages it decided on.

The report counts verdict transitions of every judged call (baseline -> candidate), tools gained and
lost by available and advertised, and fail-closed decisions on either side, then lists every change
with its run, message index, tool_call_id, tool and both sides' reasons. --fail-on names transitions
that fail the replay (exit 1): FROM->TO of verdicts (execute, not_available_yet, unknown_tool,
invalid_args, denied, approval_required),
available/unavailable, advertised/unadvertised or ok/fail_closed, with * for any state; for example
--fail-on 'denied->execute,*->fail_closed'; or the preset loosening: any change toward execute (a verdict
nearer execute, a tool gained, fail_closed->ok), which the HTML report colours apart from tightening. --approvals passes a person's answers (as eval --approvals
takes them) to every step of every history run, on both sides: each binds only to the call whose digest
it carries. A logged decision is decided with the approvals its input document carries (those that
were bound to its calls), as it keeps its context. --candidate-registry replays a registry change: the
candidate decides with that registry (and, without --candidate, the baseline's policies), the baseline
with --registry; logged decisions keep the facts derived with the registry they were decided with, so
with it only histories are replayed (a logged decision among the inputs: exit 2). Inputs are read as
they arrive, gunzipped as they are read: a document or JSON Lines line over --max-bytes (64 MiB by
default, counted once gunzipped) is refused at its file and line (exit 2) as soon as it passes the
limit. Progress goes to stderr when it is a terminal.

--receipt-key signs, for each call whose verdict changes to execute, the execution receipt the candidate
would hand out (the change's candidate "receipt" in --format json, with the run's id as run_id), valid
for --receipt-ttl: what a tool service would accept from the candidate (docs/trust.md).

A decision logged by a sidecar with --receipt-key or --approver-keys records the receipts it handed out
(their jti and kid), the keys that verify them, and what its signature check made of each approval.
replay verifies every recorded receipt against the call it was handed out with (run, tool_call_id,
tool, the arguments it would execute with) as of the decision's time, with the keys the event records
or, given --receipt-keys (a JWKS file, or an http(s) URL such as the sidecar's /v1/keys), with those
instead. --approver-keys judges again, as the sidecar's --approver-keys does, the signature of every
approval a logged decision was decided with (and those of --approvals): one that does not verify is
decided as not applied on both sides. A receipt or approval signature that does not verify is a
finding, listed with its reason after the summary (json: "audit"); any finding fails the replay (exit
1). See docs/replay.md, "Recorded receipts and approvals".

--format junit writes JUnit XML for CI: a testcase per change (its run as classname), with a failure
when --fail-on matches it, a failed testcase per finding, and one passing testcase counting what was
replayed.` + exitCodes("0  the replay ran; no change matched --fail-on and every recorded receipt and approval signature verified",
			"1  the replay ran and a change matched --fail-on (the gate failed), or a recorded receipt or approval signature did not verify (a finding)", exitLineBad),
		Example: `  policycheck replay --registry examples/registry.yaml --baseline examples/policies \
    --candidate new-policies --context examples/context/support.json examples/histories`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(replayFormats, format)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("candidate") && !cmd.Flags().Changed("candidate-registry") {
				// Without it the candidate would be the shipped defaults
				// alone, a comparison no one means to make.
				return badInput(fmt.Errorf("replay needs --candidate (the changed policies) or --candidate-registry (a changed registry)"))
			}
			if workers < 0 {
				return badInput(fmt.Errorf("--workers must be 0 (one per core) or more, not %d", workers))
			}
			gate, err := replay.ParseGate(failOn)
			if err != nil {
				return badInput(err)
			}
			reg, err := loader.ReadRegistry(registry)
			if err != nil {
				return badInput(err)
			}
			candReg := reg
			if cmd.Flags().Changed("candidate-registry") {
				if candReg, err = loader.ReadRegistry(candRegistry); err != nil {
					return badInput(err)
				}
				if !cmd.Flags().Changed("candidate") {
					candidate = baseline
				}
			}
			if maxBytes < 0 {
				return badInput(fmt.Errorf("--max-bytes must be 0 (no limit) or more, not %d", maxBytes))
			}
			lo := replay.LoadOptions{Reader: loader.DefaultReader()}
			lo.Reader.Limits.MaxBytes, lo.Reader.Schema = maxBytes, !noSchema
			if ctxPath != "" {
				if lo.Context, err = readContext(cmd, ctxPath, reg, candReg); err != nil {
					return err
				}
			}
			approverKeys, err := ak.keys(cmd)
			if err != nil {
				return err
			}
			if approvalsPath != "" {
				raw, err := readFile(cmd, approvalsPath)
				if err != nil {
					return badInput(err)
				}
				if lo.Approvals, err = loader.ReadApprovalsFile(approvalsPath, raw); err != nil {
					return badInput(err)
				}
				if approverKeys != nil {
					v, err := ak.verifier(cmd)
					if err != nil {
						return err
					}
					lo.Approvals = v.Check(lo.Approvals, "") // as eval does: no run
				}
			}
			var receiptKeys jwk.Set
			if cmd.Flags().Changed("receipt-keys") {
				if receiptKeysFrom == "" {
					return badInput(errors.New("--receipt-keys names a JWKS file or URL; an empty name is not one"))
				}
				if receiptKeys, err = readKeys(cmd, "--receipt-keys", receiptKeysFrom); err != nil {
					return badInput(err)
				}
			}
			runs, skipped, err := replay.Load(args, lo)
			if err != nil {
				return badInput(err)
			}
			if skipped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "replay: skipped %d record(s) of serve's log that are not decisions\n", skipped)
			}
			// --context and --approvals apply to history runs only: with
			// none among the inputs nothing would read them.
			if (ctxPath != "" || approvalsPath != "") && !slices.ContainsFunc(runs, func(r *replay.Run) bool { return r.History != nil }) {
				flag := "--context"
				if approvalsPath != "" {
					flag = "--approvals"
				}
				return badInput(fmt.Errorf("%s applies to history runs, and every input is a logged decision, which "+
					"keeps the context and approvals its input document carries: drop %s", flag, flag))
			}
			// --receipt-keys verifies what decision logs recorded, and
			// --approver-keys judges their approvals or --approvals': with
			// nothing for them to read, either is refused.
			logged := slices.ContainsFunc(runs, func(r *replay.Run) bool { return r.History == nil })
			if receiptKeys != nil && !logged {
				return badInput(errors.New("--receipt-keys verifies the receipts decision logs recorded, and no input is a decision log: drop --receipt-keys"))
			}
			if approverKeys != nil && !logged && approvalsPath == "" {
				return badInput(errors.New("--approver-keys judges the approvals of logged decisions and of --approvals, and there are neither: drop --approver-keys"))
			}
			side := func(name string, pols []string, reg *facts.Registry) (*engine.Engine, error) {
				opts := []engine.Option{engine.Registry(reg), engine.PolicyPaths(pols...)}
				if noDefaults {
					opts = append(opts, engine.WithoutDefaults())
				}
				flowOpts, err := flows.options()
				if err != nil {
					return nil, err
				}
				opts = append(opts, flowOpts...)
				e, err := engine.New(cmd.Context(), opts...)
				if err != nil {
					return nil, badInput(fmt.Errorf("%s: %w", name, err))
				}
				return e, nil
			}
			sides := replay.Sides{BaselinePolicies: baseline, CandidatePolicies: candidate, BaselineRegistry: registry, CandidateRegistry: registry}
			if candReg != reg {
				sides.CandidateRegistry = candRegistry
			}
			if sides.Baseline, err = side("--baseline", baseline, reg); err != nil {
				return err
			}
			if sides.Candidate, err = side("--candidate", candidate, candReg); err != nil {
				return err
			}
			signer, err := rf.signer(cmd)
			if err != nil {
				return err
			}
			ro := replay.Options{Workers: workers, ReceiptKeys: receiptKeys, ReceiptKeysFrom: receiptKeysFrom, ApproverKeys: approverKeys, Receipts: signer}
			prog := stderrProgress(cmd, "replay", len(runs))
			ro.Progress = prog
			rep, err := replay.Replay(cmd.Context(), sides, runs, ro)
			prog.Finish()
			if err != nil {
				return badInput(err)
			}
			if err := render.Write(cmd.OutOrStdout(), f, &render.Doc{Replay: rep, FailOn: gate}); err != nil {
				return err
			}
			var failed []string
			if m := gate.Matches(rep); len(m) > 0 {
				failed = append(failed, "--fail-on matched: "+strings.Join(m, ", "))
			}
			if rep.Audit != nil && len(rep.Audit.Findings) > 0 {
				failed = append(failed, fmt.Sprintf("%d recorded receipt(s) or approval signature(s) did not verify (the report's findings)", len(rep.Audit.Findings)))
			}
			if failed != nil {
				return &exitError{code: ExitFailed, err: fmt.Errorf("replay: %s", strings.Join(failed, "; "))}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&registry, "registry", "", "tool registry (YAML or JSON) (required)")
	fl.StringArrayVar(&baseline, "baseline", nil, "baseline policy file, directory or OPA bundle (repeatable)")
	fl.StringArrayVar(&candidate, "candidate", nil, "candidate policy file, directory or OPA bundle (repeatable; required unless --candidate-registry)")
	fl.StringVar(&candRegistry, "candidate-registry", "", "registry the candidate decides with, to replay a registry change (histories only; without --candidate, the candidate keeps the baseline's policies)")
	fl.StringVar(&ctxPath, "context", "", "JSON object handed to policies as input.context for history runs (logged decisions keep theirs)")
	fl.StringVarP(&format, "format", "f", "pretty", "report format: pretty, json, html or junit (JUnit XML: a testcase per change, failed when --fail-on matches it)")
	fl.StringArrayVar(&failOn, "fail-on", nil, "transitions that fail the replay (exit 1), comma-separated FROM->TO or loosening (repeatable)")
	fl.BoolVar(&noDefaults, "no-defaults", false, "do not load the shipped default policies on either side")
	fl.BoolVar(&noSchema, "no-schema", false, "skip JSON Schema validation of histories")
	fl.Int64Var(&maxBytes, "max-bytes", loader.DefaultReader().Limits.MaxBytes, "largest document (a history, an array of decision-log events) or JSON Lines line accepted, in bytes, once gunzipped; 0: no limit")
	fl.IntVar(&workers, "workers", 0, "runs replayed at once (0: one per core)")
	fl.StringVar(&approvalsPath, "approvals", "", "answers to calls that needed approval (as eval --approvals), for every step of history runs on both sides (logged decisions keep theirs)")
	flows.register(fl)
	rf.register(cmd)
	fl.StringVar(&receiptKeysFrom, "receipt-keys", "", "JWKS file or http(s) URL (the sidecar's /v1/keys) that verifies the receipts logged decisions recorded, instead of the keys each event records")
	fl.StringVar(&ak.path, "approver-keys", "", "JWKS of approver keys: judge again the signatures of the approvals logged decisions were decided with (and of --approvals), as serve --approver-keys does")
	_ = cmd.MarkFlagRequired("registry")
	return cmd
}
