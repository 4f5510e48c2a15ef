package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/sdk"
)

// CertsDir is the certificates directory of a sandbox in dir.
func CertsDir(dir string) string { return filepath.Join(dir, "certs") }

// CAKey is where the CA key of a sandbox in dir is.
func CAKey(dir string) string { return filepath.Join(dir, "ca.key") }

// ChunkserverCertFile and ChunkserverKeyFile are where the certificate
// of the sandbox's chunkserver i is, in its certificates directory: each
// chunkserver has its own (chunkserver/chunkserver-I), so that the
// nameserver can tell one chunkserver's reports from another's.
func ChunkserverCertFile(i int) string { return fmt.Sprintf("chunkserver-%d.crt", i) }

// ChunkserverKeyFile is the key of ChunkserverCertFile(i).
func ChunkserverKeyFile(i int) string { return fmt.Sprintf("chunkserver-%d.key", i) }

// loadCerts makes the sandbox's certificates if its folder has none yet
// (what is missing, while the CA key is there), then reads them.
func (s *Sandbox) loadCerts() error {
	if err := s.makeCerts(); err != nil {
		return fmt.Errorf("sandbox: certificates: %w", err)
	}
	var err error
	if s.node, err = certs.LoadNode(s.CertsDir()); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	s.csNodes = make([]*certs.Creds, s.cfg.Chunkservers)
	for i := range s.csNodes {
		if s.csNodes[i], err = certs.LoadNodeFiles(s.CertsDir(), ChunkserverCertFile(i), ChunkserverKeyFile(i)); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if s.client, err = certs.LoadClient(s.CertsDir(), certs.ClientUser); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

// makeCerts makes what the folder lacks: the CA, the nameservers'
// certificate (node.crt, role nameserver; one made before roles is made
// again), one per chunkserver, the client's and the admin's.
func (s *Sandbox) makeCerts() error {
	dir, caKey := s.CertsDir(), CAKey(s.cfg.Dir)
	if !exists(filepath.Join(dir, certs.CAFile)) {
		if err := certs.CreateCA(dir, caKey, certs.Options{}); err != nil {
			return err
		}
	}
	need := func(file string) bool { return !exists(filepath.Join(dir, file)) }
	nsOld := !need(certs.NodeCertFile) && !isNameServerCert(filepath.Join(dir, certs.NodeCertFile))
	missing := need(certs.NodeCertFile) || nsOld || need(certs.ClientCertFile(certs.ClientUser)) || need(certs.ClientCertFile(certs.AdminUser))
	for i := range s.cfg.Chunkservers {
		missing = missing || need(ChunkserverCertFile(i))
	}
	if !missing || !exists(caKey) {
		return nil // nothing to make, or someone else's CA: loading says what is missing
	}
	ca, err := certs.LoadAuthority(dir, caKey)
	if err != nil {
		return err
	}
	if need(certs.NodeCertFile) || nsOld {
		if err := ca.CreateNode(dir, certs.RoleNameServer, "", s.hosts(), certs.Options{Overwrite: nsOld}); err != nil {
			return err
		}
	}
	for i := range s.cfg.Chunkservers {
		if need(ChunkserverCertFile(i)) {
			name := fmt.Sprintf("chunkserver-%d", i)
			if err := ca.CreateNodeFiles(dir, ChunkserverCertFile(i), ChunkserverKeyFile(i), certs.RoleChunkserver, name, s.hosts(), certs.Options{}); err != nil {
				return err
			}
		}
	}
	for _, id := range []certs.Identity{{Kind: certs.KindClient, Name: certs.ClientUser}, {Kind: certs.KindAdmin, Name: certs.AdminUser}} {
		if need(certs.ClientCertFile(id.Name)) {
			if err := ca.CreateClient(dir, id, certs.Options{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// isNameServerCert reports whether the certificate at path names a
// nameserver (a node certificate made before roles does not).
func isNameServerCert(path string) bool {
	infos, err := certs.List(filepath.Dir(path))
	if err != nil {
		return false
	}
	for _, in := range infos {
		if in.File == filepath.Base(path) && in.Err == nil {
			return in.Identity.IsNameServer()
		}
	}
	return false
}

// hosts are those the node certificates are for: loopback, and the hosts
// of the listen addresses configured (a sandbox listening on another
// interface).
func (s *Sandbox) hosts() []string {
	hosts := []string{"127.0.0.1", "localhost", "::1"}
	for _, addr := range append([]string{s.cfg.NameServerAddr}, s.cfg.ChunkserverAddrs...) {
		h, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(h); err != nil || h == "" || (ip != nil && ip.IsUnspecified()) || slices.Contains(hosts, h) {
			continue
		}
		hosts = append(hosts, h)
	}
	return hosts
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// CertsDir is the directory of the sandbox's certificates; "" when it is
// insecure.
func (s *Sandbox) CertsDir() string {
	if s.cfg.Insecure {
		return ""
	}
	return CertsDir(s.cfg.Dir)
}

// ClientOption has an SDK client present the sandbox's certificate of user
// (certs.ClientUser or certs.AdminUser), or speak plaintext to an insecure
// sandbox.
func (s *Sandbox) ClientOption(user string) sdk.Option {
	return sdk.WithCertsDir(s.CertsDir(), user)
}

// AsClient is ClientOption of the sandbox's client certificate.
func (s *Sandbox) AsClient() sdk.Option { return s.ClientOption(certs.ClientUser) }

// AsAdmin is ClientOption of the sandbox's admin certificate.
func (s *Sandbox) AsAdmin() sdk.Option { return s.ClientOption(certs.AdminUser) }

// DialOption has a raw gRPC client of the sandbox's daemons present the
// client certificate (certs.ClientUser), or speak plaintext to an insecure
// sandbox.
func (s *Sandbox) DialOption() grpc.DialOption {
	return grpc.WithTransportCredentials(certs.TransportCredentials(s.client))
}

// DialOptionAs is DialOption presenting the certificate of user instead
// (plaintext to an insecure sandbox).
func (s *Sandbox) DialOptionAs(user string) (grpc.DialOption, error) {
	if s.client == nil {
		return s.DialOption(), nil
	}
	c, err := certs.LoadClient(s.CertsDir(), user)
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(certs.TransportCredentials(c)), nil
}

// NodeDialOption has a raw gRPC client present the nameservers' node
// certificate, as a nameserver peer does (plaintext to an insecure
// sandbox); each chunkserver has its own (ChunkserverCertFile).
func (s *Sandbox) NodeDialOption() grpc.DialOption {
	return grpc.WithTransportCredentials(certs.TransportCredentials(s.node))
}

// CreateClient makes a client certificate for id in the sandbox's
// certificates directory, with the CA key the sandbox made, so tests can
// act as more identities than the two the sandbox makes.
func (s *Sandbox) CreateClient(id certs.Identity) error {
	if s.cfg.Insecure {
		return errors.New("sandbox: an insecure sandbox has no certificates")
	}
	ca, err := certs.LoadAuthority(s.CertsDir(), CAKey(s.cfg.Dir))
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return ca.CreateClient(s.CertsDir(), id, certs.Options{})
}

// HTTPClient is a client of the daemons' HTTP ports (metrics): HTTPS with
// the client certificate, or plain HTTP for an insecure sandbox. Its
// idle connections close with CloseIdleConnections.
func (s *Sandbox) HTTPClient() *http.Client { return httpClient(s.client) }

// AdminHTTPClient is HTTPClient with the admin certificate (the status
// page answers admins only).
func (s *Sandbox) AdminHTTPClient() (*http.Client, error) {
	if s.client == nil {
		return httpClient(nil), nil
	}
	admin, err := certs.LoadClient(s.CertsDir(), certs.AdminUser)
	if err != nil {
		return nil, err
	}
	return httpClient(admin), nil
}

func httpClient(c *certs.Creds) *http.Client {
	if c == nil {
		return &http.Client{Transport: &http.Transport{}}
	}
	// The transport sets the server name of each request's host.
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.ClientConfig("")}}
}

// URL is the URL of path on the HTTP port at addr of one of the
// sandbox's daemons.
func (s *Sandbox) URL(addr, path string) string {
	if s.client == nil {
		return "http://" + addr + path
	}
	return "https://" + addr + path
}
