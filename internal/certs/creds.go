package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/golang/glog"
)

// Creds are the certificate a process presents and the CA it verifies its
// peers with, read from a certificates directory and read again when the
// files change (see the package documentation).
type Creds struct {
	dir string
	// paths are ca.crt, the certificate and its key, in that order.
	paths [3]string
	// node says the certificate must name a node; otherwise a client or an
	// admin.
	node bool

	mu struct {
		sync.Mutex
		// cur is the material in use, read from files as they were at stamp.
		cur   *material
		stamp stamp
		// failed is the state of the files that last failed to load, so
		// that the failure is logged (and tried) once per change.
		failed stamp
		// statErr is the last error looking at the files, logged once.
		statErr string
	}
}

// material is one reading of the files.
type material struct {
	cert  tls.Certificate
	roots *x509.CertPool
	id    Identity
}

// LoadNode reads the node certificate of dir (node.crt, node.key, ca.crt).
func LoadNode(dir string) (*Creds, error) {
	return load(dir, NodeCertFile, NodeKeyFile, true)
}

// LoadNodeFiles reads the node certificate certFile and its key keyFile
// in dir, with dir's ca.crt (one of several daemons sharing a directory).
func LoadNodeFiles(dir, certFile, keyFile string) (*Creds, error) {
	return load(dir, certFile, keyFile, true)
}

// LoadClient reads the certificate of the client name in dir
// (client.NAME.crt and .key, ca.crt): a client's or an admin's.
func LoadClient(dir, name string) (*Creds, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("client name: %w", err)
	}
	return load(dir, ClientCertFile(name), ClientKeyFile(name), false)
}

func load(dir, certFile, keyFile string, node bool) (*Creds, error) {
	c := &Creds{dir: dir, node: node, paths: [3]string{
		filepath.Join(dir, CAFile), filepath.Join(dir, certFile), filepath.Join(dir, keyFile)}}
	st, err := c.stat()
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	m, err := c.read()
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	c.mu.cur, c.mu.stamp = m, st
	return c, nil
}

// Dir is the certificates directory c reads.
func (c *Creds) Dir() string { return c.dir }

// Identity is the identity of the certificate in use.
func (c *Creds) Identity() Identity { return c.current().id }

// NotAfter is when the certificate in use expires.
func (c *Creds) NotAfter() time.Time { return c.current().cert.Leaf.NotAfter }

// read reads and checks the three files.
func (c *Creds) read() (*material, error) {
	cas, err := readCerts(c.paths[0])
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	keyPEM, err := readKeyPEM(c.paths[2])
	if err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(c.paths[1])
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s with %s: %w", c.paths[1], c.paths[2], err)
	}
	id, err := IdentityOf(pair.Leaf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.paths[1], err)
	}
	if c.node != (id.Kind == KindNode) {
		return nil, fmt.Errorf("%s names %s, not a %s", c.paths[1], id, map[bool]string{true: "node", false: "client or admin"}[c.node])
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%s does not verify against %s: %w", c.paths[1], c.paths[0], err)
	}
	return &material{cert: pair, roots: roots, id: id}, nil
}

// stamp is what the three files were at a moment: a change of any shows
// in their size, modification time or inode (a file renamed into place).
type stamp [3]os.FileInfo

func (c *Creds) stat() (stamp, error) {
	var st stamp
	for i, p := range c.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return st, err
		}
		st[i] = fi
	}
	return st, nil
}

func (s stamp) same(o stamp) bool {
	for i := range s {
		if s[i] == nil || o[i] == nil || s[i].Size() != o[i].Size() || !s[i].ModTime().Equal(o[i].ModTime()) || !os.SameFile(s[i], o[i]) {
			return false
		}
	}
	return true
}

// current returns the material to use for a handshake now, reading the
// files again if they changed since they were last read. The files are
// small and read under the mutex, so that handshakes racing a change read
// them once.
func (c *Creds) current() *material {
	st, err := c.stat()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// A file missing for a moment of a rotation, or gone: what was
		// read stays in use.
		if msg := err.Error(); msg != c.mu.statErr {
			c.mu.statErr = msg
			glog.Warningf("certificates in %s: %v; the ones read before stay in use", c.dir, err)
		}
		return c.mu.cur
	}
	c.mu.statErr = ""
	if st.same(c.mu.stamp) || st.same(c.mu.failed) {
		return c.mu.cur
	}
	m, err := c.read()
	if err != nil {
		c.mu.failed = st
		glog.Warningf("certificates in %s changed but do not load (the ones read before stay in use): %v", c.dir, err)
		return c.mu.cur
	}
	c.mu.cur, c.mu.stamp, c.mu.failed = m, st, stamp{}
	glog.Infof("certificates reloaded from %s: %s, valid until %s", c.dir, m.id, m.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return m
}

// serverConfig is a listener's TLS: TLS 1.3, the peer's certificate
// required, verified against the CA and naming an identity. No session
// tickets: a resumed session would skip the verification of a CA that has
// changed since.
func (m *material) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{m.cert},
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              m.roots,
		SessionTicketsDisabled: true,
		VerifyConnection:       requireIdentity,
	}
}

// clientConfig is a dialer's TLS: TLS 1.3, the server verified against
// the CA for serverName, and a node.
func (m *material) clientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{m.cert},
		RootCAs:          m.roots,
		ServerName:       serverName,
		VerifyConnection: requireNodeServer,
	}
}

// peerIdentity is the identity of the verified peer of cs.
func peerIdentity(cs tls.ConnectionState) (Identity, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, errors.New("peer certificate not verified")
	}
	return IdentityOf(cs.VerifiedChains[0][0])
}

func requireIdentity(cs tls.ConnectionState) error {
	_, err := peerIdentity(cs)
	return err
}

func requireNodeServer(cs tls.ConnectionState) error {
	id, err := peerIdentity(cs)
	if err != nil {
		return err
	}
	if id.Kind != KindNode {
		return fmt.Errorf("server presents the certificate of %s, not of a node", id)
	}
	return nil
}

// ServerConfig is the TLS configuration of a listener that is not gRPC's
// (the Raft transport): each handshake uses the certificates as they are
// on disk then.
func (c *Creds) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.current().serverConfig(), nil
		},
	}
}

// ClientConfig is the TLS configuration of one dial to serverName (the
// host of the address dialed) on a link that is not gRPC's (the Raft
// transport): take a new one for each dial, so that it has the
// certificates as they are on disk then.
func (c *Creds) ClientConfig(serverName string) *tls.Config {
	return c.current().clientConfig(serverName)
}
