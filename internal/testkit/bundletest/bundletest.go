// Package bundletest changes built OPA bundles for tests: a bundle whose
// file was edited after it was signed, which a sidecar verifying bundle
// signatures must refuse.
package bundletest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tamper returns the gzipped tarball raw with old replaced by new in its
// file named file, and every other file (the signature among them) as it
// was. The test fails when raw holds no such file.
func Tamper(t testing.TB, raw []byte, file, old, new string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	changed := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		if hdr.Name == file {
			b, changed = []byte(strings.ReplaceAll(string(b), old, new)), true
		}
		hdr.Size = int64(len(b))
		require.NoError(t, tw.WriteHeader(hdr))
		_, err = tw.Write(b)
		require.NoError(t, err)
	}
	require.True(t, changed, "no %s in the bundle", file)
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return out.Bytes()
}
