package opaplugins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bundleapi "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/stretchr/testify/require"
)

// TestStore: the shipped policies are seeded under their own prefix (no
// tests); what a bundle activated is read back as modules plus its data
// in a directory of its own (OPA's data.system left out), and the
// revisions of the bundles activated are read from the store.
func TestStore(t *testing.T) {
	ctx := context.Background()
	store := inmem.New()
	require.NoError(t, SeedDefaults(store))
	ids := func() []string {
		var ids []string
		require.NoError(t, storage.Txn(ctx, store, storage.TransactionParams{}, func(txn storage.Transaction) (err error) {
			ids, err = store.ListPolicies(ctx, txn)
			return err
		}))
		return ids
	}
	seeded := ids()
	require.NotEmpty(t, seeded)
	for _, id := range seeded {
		require.True(t, strings.HasPrefix(id, defaultsPrefix), id)
		require.False(t, strings.HasSuffix(id, "_test.rego"), id)
	}

	opts, dir, err := StorePolicies(ctx, store)
	require.NoError(t, err)
	require.Len(t, opts, 1, "the modules only: no data")
	require.Empty(t, dir)

	require.NoError(t, storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
		if err := store.UpsertPolicy(ctx, txn, "b/p.rego", []byte("package p\n")); err != nil {
			return err
		}
		if err := store.Write(ctx, txn, storage.AddOp, storage.MustParsePath("/limits"), map[string]any{"max": 3}); err != nil {
			return err
		}
		return bundleapi.WriteManifestToStore(ctx, store, txn, "b", bundleapi.Manifest{Revision: "r7", Roots: &[]string{"limits", "p"}})
	}))
	opts, dir, err = StorePolicies(ctx, store)
	require.NoError(t, err)
	require.NotEmpty(t, dir)
	defer os.RemoveAll(dir)
	require.Len(t, opts, 2, "the modules and the data")
	raw, err := os.ReadFile(filepath.Join(dir, "data.json"))
	require.NoError(t, err)
	require.JSONEq(t, `{"limits": {"max": 3}}`, string(raw), "data.system is OPA's own")

	require.Equal(t, map[string]string{"b": "r7"}, ActiveRevisions(store, []string{"b", "other"}))
}
