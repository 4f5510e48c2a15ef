// Package testcluster starts a whole BFS cluster inside a test: a real
// nameserver (and chunkservers) serving gRPC on 127.0.0.1:0 with data under
// t.TempDir(), stopped by t.Cleanup. No fixed ports, no external processes.
//
// A cluster is secure, as a sandbox is: a CA and certificates are made in
// its t.TempDir() (ECDSA P-256, a few milliseconds), every daemon serves
// mutual TLS, and clients reach it with ClientOption (the SDK),
// DialOption (raw gRPC) or --certs-dir CertsDir() (the tools). Insecure
// starts a plaintext cluster instead.
package testcluster

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/faultnet"
	"github.com/bfs-go/bfs/cluster/sandbox"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
)

// Cluster is a running in-process cluster.
type Cluster struct {
	*sandbox.Sandbox
	t testing.TB
}

// Option adjusts a cluster before it starts.
type Option func(*sandbox.Config)

// WithNameServerConfig lets a test change the configuration of every
// nameserver.
func WithNameServerConfig(fn func(*nameserver.Config)) Option {
	return func(c *sandbox.Config) {
		prev := c.NameServer
		c.NameServer = func(i int, cfg *nameserver.Config) {
			if prev != nil {
				prev(i, cfg)
			}
			fn(cfg)
		}
	}
}

// WithNameServers starts a group of n nameservers (1 by default).
func WithNameServers(n int) Option {
	return func(c *sandbox.Config) { c.NameServers = n }
}

// WithFaultNet puts the nameservers' Raft links behind fn's proxies, so
// the test can cut, black-hole or delay them.
func WithFaultNet(fn *faultnet.Net) Option {
	return func(c *sandbox.Config) { c.RaftFront = fn.Front }
}

// WithChunkserverConfig lets a test change chunkserver i's configuration
// (after WithChunkservers, which it must follow).
func WithChunkserverConfig(fn func(i int, cfg *chunkserver.Config)) Option {
	return func(c *sandbox.Config) {
		prev := c.Chunkserver
		c.Chunkserver = func(i int, cfg *chunkserver.Config) {
			if prev != nil {
				prev(i, cfg)
			}
			fn(i, cfg)
		}
	}
}

// WithChunkservers starts n chunkservers (none by default). They heartbeat
// every 100ms and the nameserver declares them dead after 1s of silence,
// so tests of failures run quickly.
func WithChunkservers(n int) Option {
	return func(c *sandbox.Config) {
		c.Chunkservers = n
		c.Chunkserver = func(_ int, cfg *chunkserver.Config) { cfg.HeartbeatInterval = 100 * time.Millisecond }
		WithNameServerConfig(func(cfg *nameserver.Config) {
			cfg.HeartbeatInterval = 100 * time.Millisecond
			cfg.DeadTimeout = time.Second
		})(c)
	}
}

// WithHTTP has every daemon serve its HTTP port (metrics, the
// nameserver's status page) on a free port: NameServerHTTPAddr and
// ChunkserverHTTPAddrs say where.
func WithHTTP() Option {
	return func(c *sandbox.Config) { c.HTTP = true }
}

// Insecure runs the cluster in plaintext, without certificates.
func Insecure() Option {
	return func(c *sandbox.Config) { c.Insecure = true }
}

// Start starts a cluster and registers its shutdown with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := sandbox.Config{Dir: t.TempDir()}
	WithNameServerConfig(func(c *nameserver.Config) {
		c.MinSessionTTL = 100 * time.Millisecond
		// Tests do not depend on the free space of the disk they run on;
		// those of the floor set it.
		c.MinFreeBytes = 0
	})(&cfg)
	for _, o := range opts {
		o(&cfg)
	}
	sb, err := sandbox.Start(cfg)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	c := &Cluster{Sandbox: sb, t: t}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("testcluster: %v", err)
		}
	})
	return c
}

// Dial returns a raw gRPC connection to the daemon at addr, with the
// cluster's client certificate, closed when the test ends.
func (c *Cluster) Dial(addr string) *grpc.ClientConn {
	c.t.Helper()
	conn, err := grpc.NewClient(addr, c.DialOption())
	if err != nil {
		c.t.Fatalf("testcluster: dial %s: %v", addr, err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// DialAs is Dial presenting the certificate of user (certs.AdminUser,
// or one NewClient made).
func (c *Cluster) DialAs(addr, user string) *grpc.ClientConn {
	c.t.Helper()
	opt, err := c.DialOptionAs(user)
	if err != nil {
		c.t.Fatalf("testcluster: dial %s as %s: %v", addr, user, err)
	}
	conn, err := grpc.NewClient(addr, opt)
	if err != nil {
		c.t.Fatalf("testcluster: dial %s: %v", addr, err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// DialNode is Dial presenting the daemons' node certificate.
func (c *Cluster) DialNode(addr string) *grpc.ClientConn {
	c.t.Helper()
	conn, err := grpc.NewClient(addr, c.NodeDialOption())
	if err != nil {
		c.t.Fatalf("testcluster: dial %s: %v", addr, err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// NewClient makes a client certificate for name (an admin's with admin)
// and returns the user to present it as (ClientOption, DialAs).
func (c *Cluster) NewClient(name string, admin bool) string {
	c.t.Helper()
	id := certs.Identity{Kind: certs.KindClient, Name: name}
	if admin {
		id.Kind = certs.KindAdmin
	}
	if err := c.CreateClient(id); err != nil {
		c.t.Fatalf("testcluster: client certificate of %s: %v", id, err)
	}
	return name
}

// DialCreds is Dial presenting creds (a node's certificate, say).
func (c *Cluster) DialCreds(addr string, creds *certs.Creds) *grpc.ClientConn {
	c.t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.TransportCredentials(creds)))
	if err != nil {
		c.t.Fatalf("testcluster: dial %s: %v", addr, err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// Authority is the cluster's CA, to make more certificates with.
func (c *Cluster) Authority() *certs.Authority {
	c.t.Helper()
	ca, err := certs.LoadAuthority(c.CertsDir(), sandbox.CAKey(filepath.Dir(c.CertsDir())))
	if err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
	return ca
}

// NameServerCreds are the nameservers' node certificate (role
// nameserver); ChunkserverCreds(i) chunkserver i's (role chunkserver).
// A test presents them to act as that daemon.
func (c *Cluster) NameServerCreds() *certs.Creds {
	c.t.Helper()
	creds, err := certs.LoadNode(c.CertsDir())
	if err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
	return creds
}

// ChunkserverCreds are chunkserver i's node certificate.
func (c *Cluster) ChunkserverCreds(i int) *certs.Creds {
	c.t.Helper()
	creds, err := certs.LoadNodeFiles(c.CertsDir(), sandbox.ChunkserverCertFile(i), sandbox.ChunkserverKeyFile(i))
	if err != nil {
		c.t.Fatalf("testcluster: %v", err)
	}
	return creds
}

// Metrics returns what /metrics on the HTTP port at addr of one of the
// cluster's daemons says (a port a test configured).
func (c *Cluster) Metrics(addr string) string {
	c.t.Helper()
	hc := c.HTTPClient()
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(c.URL(addr, "/metrics"))
	if err != nil {
		c.t.Fatalf("testcluster: metrics of %s: %v", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("testcluster: metrics of %s: %s %v", addr, resp.Status, err)
	}
	return string(b)
}

// RestartNameServer restarts the nameserver on the same data and address.
func (c *Cluster) RestartNameServer() {
	c.t.Helper()
	if err := c.Sandbox.RestartNameServer(); err != nil {
		c.t.Fatalf("testcluster: restart nameserver: %v", err)
	}
}

// StopChunkserver stops chunkserver i; its data stays.
func (c *Cluster) StopChunkserver(i int) {
	c.t.Helper()
	if err := c.Sandbox.StopChunkserver(i); err != nil {
		c.t.Fatalf("testcluster: stop chunkserver %d: %v", i, err)
	}
}

// RestartChunkserver starts chunkserver i again on its data and address.
func (c *Cluster) RestartChunkserver(i int) {
	c.t.Helper()
	if err := c.Sandbox.RestartChunkserver(i); err != nil {
		c.t.Fatalf("testcluster: restart chunkserver %d: %v", i, err)
	}
}
