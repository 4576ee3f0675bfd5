package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns the PEM certificate and key of a leaf with this serial,
// for 127.0.0.1 (server) or a client.
func (ca *testCA) issue(t *testing.T, serial int64, client bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kd, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// replaceFile writes data to path as a rotation does: a new file renamed
// over the old one.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// servedSerial connects anew and returns the serial of the certificate
// the server presents.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestServeReloadsItsKeyPair: serve presents the key pair its files hold
// now to each new connection: a rotated pair without a restart; a pair
// that does not load (a rotation caught midway) leaves the last good one
// served, until the files hold a good pair again.
func TestServeReloadsItsKeyPair(t *testing.T) {
	bin, reg, _ := exampleServe(t)
	ca := newTestCA(t, "rotating CA")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	c, k := ca.issue(t, 100, false)
	replaceFile(t, certPath, c)
	replaceFile(t, keyPath, k)
	p := servetest.Start(t, bin, "--registry", reg, "--tls-cert", certPath, "--tls-key", keyPath)
	addr := strings.TrimPrefix(p.URL, "http://")
	require.Equal(t, int64(100), servedSerial(t, addr, roots))

	c, k = ca.issue(t, 200, false)
	replaceFile(t, keyPath, k)
	// The key alone is new: it is not the certificate's, so the pair does
	// not load, and the last good one is served.
	require.Equal(t, int64(100), servedSerial(t, addr, roots))
	replaceFile(t, certPath, c)
	require.Equal(t, int64(200), servedSerial(t, addr, roots))

	replaceFile(t, certPath, []byte("-----BEGIN CERTIFICATE-----\nnot one\n"))
	require.Equal(t, int64(200), servedSerial(t, addr, roots))
	require.NoError(t, os.Remove(certPath))
	require.Equal(t, int64(200), servedSerial(t, addr, roots))
	c, k = ca.issue(t, 300, false)
	replaceFile(t, keyPath, k)
	replaceFile(t, certPath, c)
	require.Equal(t, int64(300), servedSerial(t, addr, roots))
}

// TestServeMutualTLS: with --tls-ca-cert, a client must present a
// certificate that authority issued; a diagnostic address asks for none,
// since probes have none.
func TestServeMutualTLS(t *testing.T) {
	bin, reg, _ := exampleServe(t)
	ca, other := newTestCA(t, "server and clients CA"), newTestCA(t, "another CA")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	sc, sk := ca.issue(t, 1, false)
	p := servetest.Start(t, bin, "--registry", reg,
		"--tls-cert", write("tls.crt", sc), "--tls-key", write("tls.key", sk), "--tls-ca-cert", write("ca.crt", ca.pem),
		"--diagnostic-addr", "127.0.0.1:0")
	url := strings.Replace(p.URL, "http://", "https://", 1)
	client := func(certPEM, keyPEM []byte) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if certPEM != nil {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			require.NoError(t, err)
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	}
	body := `{"history": []}`

	good := client(ca.issue(t, 2, true))
	resp, err := good.Post(url+"/v1/decide", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	for note, c := range map[string]*http.Client{"no certificate": client(nil, nil), "another authority's": client(other.issue(t, 3, true))} {
		resp, err := c.Post(url+"/v1/decide", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
		require.Error(t, err, note)
	}

	resp, err = client(nil, nil).Get("https://" + diagnosticURL(t, p) + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
