package opaplugins

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	bundleapi "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/storage"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/policies"
)

// defaultsPrefix names the shipped policies in the plugin manager's store.
const defaultsPrefix = "policycheck-defaults/"

// SeedDefaults writes the shipped policies into the plugin manager's
// store, so that OPA's bundle plugin compiles a bundle against them: a
// bundle's filter may then call the shipped library (lib.names, …), which
// OPA would otherwise refuse as an undefined function. The engine loads
// them itself, so StorePolicies leaves them out.
func SeedDefaults(store storage.Store) error {
	ctx := context.Background()
	return storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
		return fs.WalkDir(policies.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || path.Ext(p) != ".rego" || strings.HasSuffix(p, "_test.rego") {
				return err
			}
			raw, err := fs.ReadFile(policies.FS(), p)
			if err != nil {
				return err
			}
			return store.UpsertPolicy(ctx, txn, defaultsPrefix+p, raw)
		})
	})
}

// StorePolicies reads the policies and data that OPA's bundle plugin
// activated into the manager's store: every module (tests excluded) as an
// engine source named by its policy id, and the data (but OPA's own
// data.system) written to a temporary directory for engine.PolicyPaths.
// It returns the engine options and the directory, if any ("" when
// there is no data), which the caller removes once done with it.
func StorePolicies(ctx context.Context, store storage.Store) ([]engine.Option, string, error) {
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, "", err
	}
	defer store.Abort(ctx, txn)
	ids, err := store.ListPolicies(ctx, txn)
	if err != nil {
		return nil, "", err
	}
	sort.Strings(ids)
	var srcs []engine.Source
	for _, id := range ids {
		if strings.HasSuffix(id, "_test.rego") || strings.HasPrefix(id, defaultsPrefix) {
			continue
		}
		raw, err := store.GetPolicy(ctx, txn, id)
		if err != nil {
			return nil, "", err
		}
		srcs = append(srcs, engine.Source{File: id, Text: string(raw)})
	}
	opts := []engine.Option{engine.Modules(srcs...)}
	v, err := store.Read(ctx, txn, storage.RootPath)
	if err != nil {
		return nil, "", err
	}
	if av, ok := v.(ast.Value); ok {
		if v, err = ast.JSON(av); err != nil {
			return nil, "", err
		}
	}
	// The store hands out its own map: copy it, never modify it.
	root, _ := v.(map[string]any)
	data := make(map[string]any, len(root))
	for k, x := range root {
		if k != "system" {
			data[k] = x
		}
	}
	if len(data) == 0 {
		return opts, "", nil
	}
	dir, err := os.MkdirTemp("", "policycheck-bundle-data-")
	if err != nil {
		return nil, "", err
	}
	raw, err := json.Marshal(data)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "data.json"), raw, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return append(opts, engine.PolicyPaths(dir)), dir, nil
}

// ActiveRevisions reads from store the revision OPA has activated of
// each of the bundles among names that it holds.
func ActiveRevisions(store storage.Store, names []string) map[string]string {
	ctx := context.Background()
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil
	}
	active := map[string]string{}
	for _, name := range names {
		if rev, err := bundleapi.ReadBundleRevisionFromStore(ctx, store, txn, name); err == nil {
			active[name] = rev
		}
	}
	store.Abort(ctx, txn)
	return active
}
