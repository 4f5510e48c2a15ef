package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files of a certificates directory (see the package documentation).
const (
	CAFile       = "ca.crt"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// ClientCertFile is the certificate file of the client name.
func ClientCertFile(name string) string { return "client." + name + ".crt" }

// ClientKeyFile is the key file of the client name.
func ClientKeyFile(name string) string { return "client." + name + ".key" }

// Default lifetimes, as cockroach's: ten years for a CA, five for the
// certificates it signs.
const (
	DefaultCALifetime   = 10 * 365 * 24 * time.Hour
	DefaultCertLifetime = 5 * 365 * 24 * time.Hour
)

// backdate is how far before its making a certificate becomes valid, so a
// peer whose clock is a little behind accepts it at once.
const backdate = time.Hour

// Options are how a certificate is made.
type Options struct {
	// Lifetime is how long the certificate is valid; 0 means
	// DefaultCALifetime for a CA, DefaultCertLifetime for the others.
	Lifetime time.Duration
	// Overwrite replaces existing files; without it they are refused.
	Overwrite bool
	// Now is the time the certificate is made at; nil means time.Now.
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) lifetime(def time.Duration) (time.Duration, error) {
	if o.Lifetime < 0 {
		return 0, fmt.Errorf("negative lifetime %v", o.Lifetime)
	}
	if o.Lifetime == 0 {
		return def, nil
	}
	return o.Lifetime, nil
}

// CreateCA makes a new CA: its certificate in certsDir/ca.crt, its
// private key at caKeyPath (outside certsDir, ideally).
func CreateCA(certsDir, caKeyPath string, o Options) error {
	if caKeyPath == "" {
		return errors.New("no CA key path")
	}
	certPath := filepath.Join(certsDir, CAFile)
	if err := checkAbsent(o, certPath, caKeyPath); err != nil {
		return err
	}
	life, err := o.lifetime(DefaultCALifetime)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := o.now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{Organization: []string{"BFS"}, CommonName: "BFS CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(life),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(certsDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(caKeyPath), 0o700); err != nil {
		return err
	}
	return writeKeyAndCert(caKeyPath, key, certPath, der)
}

// Authority signs certificates: a CA certificate and its private key.
type Authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// LoadAuthority reads the CA of certsDir whose private key is at
// caKeyPath (ca.crt may hold several CA certificates: the one of that key
// signs).
func LoadAuthority(certsDir, caKeyPath string) (*Authority, error) {
	if caKeyPath == "" {
		return nil, errors.New("no CA key path")
	}
	cas, err := readCerts(filepath.Join(certsDir, CAFile))
	if err != nil {
		return nil, err
	}
	key, err := readKey(caKeyPath)
	if err != nil {
		return nil, err
	}
	for _, c := range cas {
		if c.IsCA && publicKeyEqual(c.PublicKey, key.Public()) {
			return &Authority{cert: c, key: key}, nil
		}
	}
	return nil, fmt.Errorf("no CA certificate in %s matches the key %s", filepath.Join(certsDir, CAFile), caKeyPath)
}

func publicKeyEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// CreateNode makes node.crt and node.key in certsDir for a daemon of role
// named name ("" for the first host) serving hosts (IP addresses and DNS
// names, at least one).
func (a *Authority) CreateNode(certsDir string, role Role, name string, hosts []string, o Options) error {
	return a.CreateNodeFiles(certsDir, NodeCertFile, NodeKeyFile, role, name, hosts, o)
}

// CreateNodeFiles is CreateNode writing certFile and keyFile in certsDir
// (several daemons of one machine sharing a directory: the sandbox).
func (a *Authority) CreateNodeFiles(certsDir, certFile, keyFile string, role Role, name string, hosts []string, o Options) error {
	if role != RoleNameServer && role != RoleChunkserver {
		return fmt.Errorf("a node certificate is for a nameserver or a chunkserver, not %v", role)
	}
	if len(hosts) == 0 {
		return errors.New("a node certificate needs at least one host")
	}
	tmpl := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		if err := checkDNSName(h); err != nil {
			return err
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
	}
	if name == "" {
		name = hosts[0]
	}
	if err := checkName(name); err != nil {
		return fmt.Errorf("node name: %w", err)
	}
	return a.issue(Identity{Kind: KindNode, Name: name, Role: role}, tmpl,
		filepath.Join(certsDir, certFile), filepath.Join(certsDir, keyFile), o)
}

// CreateClient makes client.NAME.crt and client.NAME.key in certsDir for
// id, a client or an admin.
func (a *Authority) CreateClient(certsDir string, id Identity, o Options) error {
	if id.Kind != KindClient && id.Kind != KindAdmin {
		return fmt.Errorf("a client certificate is for a client or an admin, not a %s", id.Kind)
	}
	if err := checkName(id.Name); err != nil {
		return fmt.Errorf("client name: %w", err)
	}
	tmpl := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return a.issue(id, tmpl, filepath.Join(certsDir, ClientCertFile(id.Name)), filepath.Join(certsDir, ClientKeyFile(id.Name)), o)
}

// issue signs tmpl for id and writes the key and the certificate.
func (a *Authority) issue(id Identity, tmpl *x509.Certificate, certPath, keyPath string, o Options) error {
	if err := checkAbsent(o, certPath, keyPath); err != nil {
		return err
	}
	life, err := o.lifetime(DefaultCertLifetime)
	if err != nil {
		return err
	}
	now := o.now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-backdate), now.Add(life)
	if tmpl.NotAfter.After(a.cert.NotAfter) {
		return fmt.Errorf("the certificate would outlive its CA (valid until %s): shorten its lifetime", a.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl.Subject = pkix.Name{Organization: []string{"BFS"}, OrganizationalUnit: []string{id.Label()}, CommonName: id.Name}
	tmpl.URIs = append(tmpl.URIs, id.URI())
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	if tmpl.SerialNumber, err = serial(); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(certPath), 0o755); err != nil {
		return err
	}
	return writeKeyAndCert(keyPath, key, certPath, der)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// checkDNSName refuses a host that is neither an IP address nor a DNS
// name (a port, a URL, a wildcard).
func checkDNSName(h string) error {
	if h == "" || len(h) > 253 {
		return fmt.Errorf("host %q is not an IP address or a DNS name", h)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("host %q is not an IP address or a DNS name", h)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("host %q is not an IP address or a DNS name (%q)", h, r)
			}
		}
	}
	return nil
}

// checkAbsent refuses to replace existing files unless o says to.
func checkAbsent(o Options, paths ...string) error {
	if o.Overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists (--overwrite replaces it)", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeKeyAndCert writes the key (0600), then the certificate, each
// replacing its file atomically: a reader never sees a half-written file,
// and a certificate never names a key not yet written.
func writeKeyAndCert(keyPath string, key *ecdsa.PrivateKey, certPath string, der []byte) error {
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeAtomic writes data to a temporary file beside path with mode perm,
// syncs it, renames it over path and syncs the directory, so that what it
// said it wrote survives a crash.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
