package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// certFiles is serve's certificate: the key pair in --tls-cert and
// --tls-key, read again when either file changes (another file renamed
// over it, or its modification time or size), as cert-manager and
// Kubernetes secret volumes rotate them. A long-running server then
// presents the new certificate to the next connection without a restart.
// A pair that does not load (written half, or a key that is not the
// certificate's) is logged and the last good one kept: a rotation caught
// midway never takes the server down. Each handshake costs two stat
// calls. Safe for concurrent handshakes.
type certFiles struct {
	cert, key string
	logger    *slog.Logger

	mu      sync.Mutex
	seen    [2]fileStamp // of cert and key when current was read
	current *tls.Certificate
}

// fileStamp is what tells a file changed: os.SameFile sees another file
// renamed over it, the time and size a rewrite in place.
type fileStamp struct{ fi os.FileInfo }

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	return fileStamp{fi}, err
}

func (a fileStamp) same(b fileStamp) bool {
	return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) &&
		a.fi.ModTime().Equal(b.fi.ModTime()) && a.fi.Size() == b.fi.Size()
}

// loadCertFiles reads the pair once; an error here stops serve.
func loadCertFiles(cert, key string, logger *slog.Logger) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key, logger: logger}
	stamps, pair, err := c.read()
	if err != nil {
		return nil, err
	}
	c.seen, c.current = stamps, pair
	return c, nil
}

// stamps stamps the two files.
func (c *certFiles) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, p := range []string{c.cert, c.key} {
		s, err := stampOf(p)
		if err != nil {
			return out, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.cert, c.key, err)
		}
		out[i] = s
	}
	return out, nil
}

// read stamps the files, then loads the pair they hold.
func (c *certFiles) read() ([2]fileStamp, *tls.Certificate, error) {
	stamps, err := c.stamps()
	if err != nil {
		return stamps, nil, err
	}
	pair, err := c.load()
	return stamps, pair, err
}

func (c *certFiles) load() (*tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.cert, c.key, err)
	}
	return &pair, nil
}

// get is the tls.Config's GetCertificate: the pair as the files hold it
// now, or the last good one.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, err := c.stamps()
	if err != nil || (now[0].same(c.seen[0]) && now[1].same(c.seen[1])) {
		// Unchanged, or between a rotation's remove and its write: keep serving.
		return c.current, nil
	}
	c.seen = now // a bad pair is tried again only once the files change again
	pair, err := c.load()
	if err != nil {
		c.logger.Error("the TLS key pair on disk does not load; serving the last good one", "err", err)
		return c.current, nil
	}
	c.current = pair
	c.logger.Info("TLS key pair reloaded", "cert", c.cert)
	return pair, nil
}

// clientCAs reads --tls-ca-cert: the PEM certificates of the authorities
// whose client certificates serve accepts.
func clientCAs(path string) (*x509.CertPool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, errors.New("--tls-ca-cert " + path + " holds no PEM certificate")
	}
	return pool, nil
}
