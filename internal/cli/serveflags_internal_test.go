package cli

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/server"
)

// boundField is a field of serveFlags (Config's fields included) and the
// flags its flag tag names.
type boundField struct {
	path  string // e.g. "Config.MaxBody", "Addr"
	flags []string
	value func(*serveFlags) reflect.Value
}

// serveFields lists serveFlags's exported fields, the embedded Config's
// own in place of it.
func serveFields(t *testing.T) []boundField {
	t.Helper()
	var out []boundField
	top := reflect.TypeFor[serveFlags]()
	for i := range top.NumField() {
		sf := top.Field(i)
		if sf.Anonymous && sf.Type == reflect.TypeFor[server.Config]() {
			for j := range sf.Type.NumField() {
				cf := sf.Type.Field(j)
				if !cf.IsExported() {
					continue
				}
				out = append(out, boundField{path: "Config." + cf.Name, flags: tagFlags(cf.Tag),
					value: func(f *serveFlags) reflect.Value { return reflect.ValueOf(f).Elem().Field(i).Field(j) }})
			}
			continue
		}
		require.True(t, sf.IsExported(), "serveFlags.%s: fields are exported, for their tags to be read", sf.Name)
		out = append(out, boundField{path: sf.Name, flags: tagFlags(sf.Tag),
			value: func(f *serveFlags) reflect.Value { return reflect.ValueOf(f).Elem().Field(i) }})
	}
	return out
}

func tagFlags(tag reflect.StructTag) []string {
	if v := tag.Get("flag"); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

// TestServeFlagsBind: every serve flag binds into the field of
// serveFlags (or of the server's Config in it) whose flag tag names it,
// and into that field alone; every tag names a flag serve has; every
// Config field has a flag or says, in its noflag tag, why it has none;
// and the flags' defaults are server.DefaultConfig's.
func TestServeFlagsBind(t *testing.T) {
	fields := serveFields(t)
	byFlag := map[string]string{}
	for _, bf := range fields {
		for _, name := range bf.flags {
			require.NotContains(t, byFlag, name, "two fields name --%s", name)
			byFlag[name] = bf.path
		}
	}
	sample := map[string]string{"bool": "true", "string": "x-test", "stringArray": "x-test",
		"int": "7", "int64": "7", "duration": "7s"}
	// Flags that take one of a few words take one other than their
	// default.
	enum := map[string]string{"evidence": "verified"}

	seen := map[string]bool{}
	newServeFlags().command().Flags().VisitAll(func(fl *pflag.Flag) {
		seen[fl.Name] = true
		want, ok := byFlag[fl.Name]
		if !assert.True(t, ok, "--%s binds into no field whose flag tag names it", fl.Name) {
			return
		}
		f := newServeFlags()
		cmd := f.command()
		before := snapshot(f, fields)
		v, ok := sample[fl.Value.Type()]
		if e, isEnum := enum[fl.Name]; isEnum {
			v, ok = e, true
		}
		require.True(t, ok, "--%s: no sample value for a %s flag", fl.Name, fl.Value.Type())
		require.NoError(t, cmd.Flags().Set(fl.Name, v), "--%s", fl.Name)
		var changed []string
		for i, bf := range fields {
			if !reflect.DeepEqual(before[i], bf.value(f).Interface()) {
				changed = append(changed, bf.path)
			}
		}
		assert.Equal(t, []string{want}, changed, "the fields --%s %s sets", fl.Name, v)
	})
	for name, path := range byFlag {
		assert.True(t, seen[name], "%s's flag tag names --%s, which serve does not have", path, name)
	}

	cfg := reflect.TypeFor[server.Config]()
	for i := range cfg.NumField() {
		sf := cfg.Field(i)
		if !sf.IsExported() {
			continue
		}
		flag, reason := sf.Tag.Get("flag"), sf.Tag.Get("noflag")
		assert.True(t, (flag == "") != (reason == ""), "server.Config.%s has a flag tag or a noflag tag saying why not, one of them", sf.Name)
	}

	// The defaults come from one place.
	f := newServeFlags()
	f.command()
	assert.Equal(t, server.DefaultConfig(), f.Config, "serve's defaults are server.DefaultConfig")
}

func newServeFlags() *serveFlags { return &serveFlags{Config: server.DefaultConfig()} }

func snapshot(f *serveFlags, fields []boundField) []any {
	out := make([]any, len(fields))
	for i, bf := range fields {
		v := bf.value(f)
		if v.Kind() == reflect.Slice && !v.IsNil() {
			v = reflect.ValueOf(slices.Clone(v.Interface().([]string)))
		}
		out[i] = v.Interface()
	}
	return out
}

// TestServeFlagErrors: the Config fields Validate refuses are named by
// their flags, all of them at once.
func TestServeFlagErrors(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Runs, cfg.Timeout, cfg.ShadowQueue = -5, 0, 0
	err := flagErrors(cfg.Validate())
	require.Error(t, err)
	assert.Equal(t, "--runs must not be negative, not -5\n--timeout must be positive, not 0s\n--shadow-queue must be at least 1, not 0", err.Error())
}
