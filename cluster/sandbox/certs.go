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
	if s.client, err = certs.LoadClient(s.CertsDir(), certs.ClientUser); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

func (s *Sandbox) makeCerts() error {
	dir, caKey := s.CertsDir(), CAKey(s.cfg.Dir)
	if !exists(filepath.Join(dir, certs.CAFile)) {
		if err := certs.CreateCA(dir, caKey, certs.Options{}); err != nil {
			return err
		}
	}
	need := func(file string) bool { return !exists(filepath.Join(dir, file)) }
	if !need(certs.NodeCertFile) && !need(certs.ClientCertFile(certs.ClientUser)) && !need(certs.ClientCertFile(certs.AdminUser)) {
		return nil
	}
	if !exists(caKey) {
		return nil // someone else's CA: loading says what is missing
	}
	ca, err := certs.LoadAuthority(dir, caKey)
	if err != nil {
		return err
	}
	if need(certs.NodeCertFile) {
		if err := ca.CreateNode(dir, "", s.hosts(), certs.Options{}); err != nil {
			return err
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

// hosts are those the node certificate is for: loopback, and the hosts
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

// NodeDialOption has a raw gRPC client present the daemons' node
// certificate, as a chunkserver or a nameserver peer does (plaintext to
// an insecure sandbox).
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
