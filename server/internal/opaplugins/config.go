package opaplugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	opaconfig "github.com/open-policy-agent/opa/v1/config"
	"github.com/open-policy-agent/opa/v1/util"
)

// unreadOptions are the options of OPA's configuration that OPA itself
// acts on but policycheck serve does not, with why: each is refused
// rather than ignored, as is any option OPA does not know.
var unreadOptions = map[string]string{
	"default_decision":               "policycheck serves its own endpoints, not OPA's data API",
	"default_authorization_decision": "policycheck authenticates with --token-file, not an authorization policy",
	"server":                         "OPA's HTTP server options do not apply: policycheck serve has its own flags",
	"storage":                        "policycheck keeps its store in memory",
	"caching":                        "the engine does not keep OPA's inter-query built-in cache",
	"nd_builtin_cache":               "the engine does not keep OPA's non-deterministic built-in cache",
	"distributed_tracing":            "policycheck does not export traces",
	"metrics_export":                 "policycheck exports its metrics at GET /metrics",
}

// CheckConfig refuses an OPA configuration with an option OPA would
// ignore (its validation reports each one, nested ones included: a
// misspelt "decision_log" would leave decision logging off without a
// word) or that policycheck does not act on (unreadOptions).
func CheckConfig(raw []byte, id string) error {
	c, err := opaconfig.ParseConfig(raw, id)
	if err != nil {
		return err
	}
	return checkParsedConfig(c)
}

// checkParsedConfig is CheckConfig for a configuration OPA has parsed
// (and so filled with its defaults, which are not options set).
func checkParsedConfig(c *opaconfig.Config) error {
	if len(c.Warnings) > 0 {
		return errors.New(strings.Join(c.Warnings, "; "))
	}
	if err := checkLogBuffer(c.DecisionLogs); err != nil {
		return err
	}
	set, err := encodedOptions(c)
	if err != nil {
		return err
	}
	defaults, err := opaconfig.ParseConfig([]byte(`{}`), c.Labels["id"])
	if err != nil {
		return err
	}
	unset, err := encodedOptions(defaults)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(set))
	for k, v := range set {
		if d, ok := unset[k]; !ok || string(d) != string(v) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if why, ok := unreadOptions[k]; ok {
			return fmt.Errorf("configuration option %q is not read by policycheck serve: %s", k, why)
		}
	}
	return nil
}

// encodedOptions is a parsed configuration's top-level options, encoded.
func encodedOptions(c *opaconfig.Config) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	return top, json.Unmarshal(raw, &top)
}

// DiscoveredConfig holds a configuration that a discovery bundle
// delivers to what CheckConfig holds the file's to: an option OPA
// would ignore (which OPA only logs as a warning) or that policycheck
// does not act on is refused. The discovery plugin then reports the
// error (GET /health, /metrics), and the configuration in place stays.
type DiscoveredConfig struct{}

// OnConfigDiscovery is the hook of OPA's discovery plugin.
func (DiscoveredConfig) OnConfigDiscovery(_ context.Context, c *opaconfig.Config) (*opaconfig.Config, error) {
	if err := checkParsedConfig(c); err != nil {
		return nil, fmt.Errorf("discovered configuration: %w", err)
	}
	return c, nil
}

// OPA's decision-log upload size: its default, and the bounds it clamps
// a configured one to (plugins/logs).
const (
	opaUploadDefault = int64(32768)
	opaUploadMin     = int64(90)
	opaUploadMax     = int64(4294967296)
)

// logReporting is what checkLogBuffer and BoundDecisionLogs read of
// decision_logs.reporting.
type logReporting struct {
	Reporting struct {
		BufferType           string `json:"buffer_type"`
		BufferSizeLimitBytes *int64 `json:"buffer_size_limit_bytes"`
		UploadSizeLimitBytes *int64 `json:"upload_size_limit_bytes"`
	} `json:"reporting"`
}

// uploadSize is the upload size OPA uses for the configured one: its
// default when unset, else clamped to its bounds.
func (r logReporting) uploadSize() int64 {
	u := r.Reporting.UploadSizeLimitBytes
	if u == nil {
		return opaUploadDefault
	}
	return min(max(*u, opaUploadMin), opaUploadMax)
}

// logBufferChunks is how many upload chunks OPA's size buffer must hold
// at least: the server keeps two of them free (Sink.Room), and the
// third is for events.
const logBufferChunks = 3

// checkLogBuffer refuses a decision-log size buffer bound under
// logBufferChunks upload chunks (a buffer_size_limit_bytes of 50000 with
// OPA's 32,768-byte uploads): the server keeps two chunks of it free so
// that OPA never drops a chunk of events whole (see Sink), and such a
// buffer would turn away every event although the sink is healthy. It is
// refused rather than clamped: the bound is the operator's memory budget
// and the upload size their log service's limit, and which to change is
// theirs to say. The error names the key as a JSON pointer.
func checkLogBuffer(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var r logReporting
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil // OPA's own parse reports it
	}
	limit := r.Reporting.BufferSizeLimitBytes
	if r.Reporting.BufferType == "event" || limit == nil || *limit <= 0 {
		return nil
	}
	chunk := r.uploadSize()
	if *limit >= logBufferChunks*chunk {
		return nil
	}
	set := fmt.Sprintf("%d", chunk)
	if r.Reporting.UploadSizeLimitBytes == nil {
		set += ", OPA's default"
	}
	return fmt.Errorf("/decision_logs/reporting/buffer_size_limit_bytes: %d bytes is less than three times "+
		"upload_size_limit_bytes (%s): the server keeps two upload chunks of the buffer free, so that OPA never drops "+
		"a chunk of events whole, and this buffer would have no room left for events; set it to at least %d, "+
		"or upload_size_limit_bytes to at most %d", *limit, set, logBufferChunks*chunk, max(*limit/logBufferChunks, opaUploadMin))
}

// defaultLogBuffer bounds the decision-log buffer of a configuration that
// sets no bound: OPA's size buffer is unbounded by default, so a log
// service that is down would otherwise hold every decision in memory.
const defaultLogBuffer = 32 << 20

// BoundDecisionLogs returns the OPA configuration raw with the decision
// log's buffer bounded (reporting.buffer_size_limit_bytes =
// defaultLogBuffer, or three upload chunks when that is more) when it configures decision logs on the size buffer
// with neither a byte bound nor a rate limit (which OPA does not accept
// together with one). The event buffer is bounded by OPA already.
func BoundDecisionLogs(raw []byte) ([]byte, error) {
	var cfg map[string]any
	if err := util.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	dl, ok := cfg["decision_logs"].(map[string]any)
	if !ok {
		return raw, nil
	}
	rep, ok := dl["reporting"].(map[string]any)
	if !ok {
		rep = map[string]any{}
		dl["reporting"] = rep
	}
	if rep["buffer_type"] == "event" || rep["buffer_size_limit_bytes"] != nil || rep["max_decisions_per_second"] != nil {
		return raw, nil
	}
	// A bound that holds the configured uploads (checkLogBuffer).
	var r logReporting
	if b, err := json.Marshal(dl); err == nil && json.Unmarshal(b, &r) == nil {
		rep["buffer_size_limit_bytes"] = max(defaultLogBuffer, logBufferChunks*r.uploadSize())
	} else {
		rep["buffer_size_limit_bytes"] = defaultLogBuffer
	}
	return json.Marshal(cfg)
}
