package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/limitstest"
	"github.com/policycheck/policycheck/loader"
)

// TestDecodedInTheScanIsDecodeHistory: a history the envelope's scan
// decodes where it lies, on GOMAXPROCS goroutines, is the history
// DecodeHistory decodes from the member alone, and every error (a bad
// message anywhere, a part limit the goroutines cross only together, the
// byte and message limits) is DecodeHistory's, to the byte.
func TestDecodedInTheScanIsDecodeHistory(t *testing.T) {
	histories := map[string][]byte{}
	for _, c := range conformance.Cases(t) {
		histories[c.File] = []byte(c.History)
	}
	for seed := int64(1); seed <= 4; seed++ {
		o := gen.Default(80)
		o.Noise, o.CompactionRate = 0.15, 0.1
		histories["gen "+strconv.FormatInt(seed, 10)] = gen.History(seed, o)
	}
	gh := gen.History(9, gen.Default(60))
	badAt := strings.LastIndex(string(gh), `"part_kind":"`)
	histories["a bad part kind near the end"] = []byte(string(gh[:badAt]) + `"part_kind":"nope` + string(gh[badAt+len(`"part_kind":"`)+4:]))
	histories["invalid UTF-8 near the end"] = []byte(string(gh[:badAt]) + "\"x\xff\":1," + string(gh[badAt:]))

	plenty := loader.DefaultLimits()
	bodies := map[string][]byte{}
	for name, raw := range histories {
		bodies[name] = []byte(`{"history":` + string(raw) + `}`)
	}
	// The last of two history members is the one decided on.
	bodies["the second of two history members"] = []byte(`{"history": [{"kind": "nope", "parts": []}], "history": ` + string(gh) + `}`)
	bodies["a good history, then a string one"] = []byte(`{"history": ` + string(gh) + `, "history": "` + strings.Repeat("},{", 9) + `"}`)
	bodies["a history, then a context that looks like messages"] = []byte(`{"history": ` + string(gh) +
		`, "context": {"h": [{"kind": "request", "parts": []}, {"kind": "request", "parts": []}]}}`)
	noEngine := func([]byte) (*engine.Engine, *Error) { return nil, nil }
	for name, body := range bodies {
		env, herr := scanEnvelope(body, []string{"history", "context"}, "history")
		if herr != nil {
			continue // not a body the envelope reads: never decoded
		}
		h := env.Members["history"]
		want, wantErr := loader.DecodeHistory("request", h, plenty)
		limits := []loader.Limits{plenty}
		if wantErr == nil {
			limits = limitstest.OneShort(plenty, want, len(h))
		}
		for _, lim := range limits {
			in := &intake{reader: loader.Reader{Limits: lim}, minPiece: 1}
			want, wantErr := loader.DecodeHistory("request", h, lim)
			_, _, got, herr := in.stateless(body, false, noEngine)
			if wantErr != nil {
				require.Equal(t, fromLoader(wantErr, "/history"), herr, name)
				continue
			}
			require.Nil(t, herr, name)
			require.Equal(t, want, got.messages, name)
		}
	}
}
