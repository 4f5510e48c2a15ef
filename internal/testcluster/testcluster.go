// Package testcluster starts a whole BFS cluster inside a test: a real
// nameserver serving gRPC on 127.0.0.1:0 with its data under t.TempDir(),
// stopped by t.Cleanup. No fixed ports, no external processes.
package testcluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/bfs-go/bfs/nameserver"
)

// Cluster is a running in-process cluster.
type Cluster struct {
	// NameServerAddr is the nameserver's gRPC address.
	NameServerAddr string
	// NameServer is the running server.
	NameServer *nameserver.Server
	// Config is the configuration the nameserver was started with.
	Config nameserver.Config

	t      testing.TB
	cancel context.CancelFunc
	served chan error
}

// Option adjusts a cluster before it starts.
type Option func(*nameserver.Config)

// WithNameServerConfig lets a test change the nameserver's configuration.
func WithNameServerConfig(fn func(*nameserver.Config)) Option { return fn }

// Start starts a cluster and registers its shutdown with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := nameserver.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.MetricsAddr = ""
	cfg.MinSessionTTL = 100 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	c := &Cluster{t: t, Config: cfg}
	c.startNameServer()
	t.Cleanup(c.Stop)
	return c
}

func (c *Cluster) startNameServer() {
	c.t.Helper()
	srv, err := nameserver.New(c.Config)
	if err != nil {
		c.t.Fatalf("testcluster: start nameserver: %v", err)
	}
	addr := "127.0.0.1:0"
	if c.NameServerAddr != "" {
		addr = c.NameServerAddr // a restart keeps the address clients know
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		c.t.Fatalf("testcluster: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.NameServer, c.NameServerAddr, c.cancel = srv, lis.Addr().String(), cancel
	c.served = make(chan error, 1)
	go func() { c.served <- srv.Serve(ctx, lis) }()
}

// RestartNameServer stops the nameserver and starts a new one on the same
// data directory and address, as after a crash-free restart.
func (c *Cluster) RestartNameServer() {
	c.t.Helper()
	c.stopNameServer()
	c.startNameServer()
}

func (c *Cluster) stopNameServer() {
	if c.NameServer == nil {
		return
	}
	c.cancel()
	if err := c.NameServer.Close(); err != nil {
		c.t.Errorf("testcluster: close nameserver: %v", err)
	}
	if err := <-c.served; err != nil {
		c.t.Errorf("testcluster: serve: %v", err)
	}
	c.NameServer = nil
}

// Stop stops everything; Start registers it with t.Cleanup.
func (c *Cluster) Stop() {
	c.stopNameServer()
}
