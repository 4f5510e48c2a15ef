// Package sandbox runs a whole BFS cluster in one process on loopback: a
// nameserver and N chunkservers, each with its data under one folder. The
// `bfs sandbox` command, bfsbench and the test cluster are built on it.
//
// A sandbox is secure unless Config.Insecure says otherwise: the first
// start on a folder makes a CA (its key in ca.key) and, in certs/, a node
// certificate for loopback and the listen addresses' hosts, a client
// certificate (certs.ClientUser) and an admin certificate
// (certs.AdminUser); every daemon then serves mutual TLS with them.
// Later starts use what is there.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
)

// Config says what to start.
type Config struct {
	// Dir holds every daemon's data (nameserver/, chunkserver-N/).
	Dir string
	// NameServerAddr is where the nameserver listens; "127.0.0.1:0" picks
	// a free port.
	NameServerAddr string
	// NameServer adjusts the nameserver's configuration before it starts.
	NameServer func(*nameserver.Config)
	// Chunkservers is how many chunkservers to start.
	Chunkservers int
	// ChunkserverAddrs, if set, are their listen addresses (one per
	// chunkserver); by default each picks a free port on 127.0.0.1.
	ChunkserverAddrs []string
	// Chunkserver adjusts chunkserver i's configuration before it starts.
	Chunkserver func(i int, cfg *chunkserver.Config)
	// Insecure runs every daemon in plaintext, without certificates.
	Insecure bool
}

// Sandbox is a running cluster.
type Sandbox struct {
	cfg Config
	// NameServerAddr is the address clients dial.
	NameServerAddr string
	// node are the daemons' certificates, client the client's; nil when
	// insecure.
	node, client *certs.Creds

	ns     *nameserver.Server
	cancel context.CancelFunc
	// chunkservers are indexed like Config.Chunkservers; a stopped one is
	// nil until restarted.
	chunkservers []*runningChunkserver
	// csAddrs are the addresses chunkservers last listened on.
	csAddrs []string
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
}

// Start starts the cluster. Close stops it.
func Start(cfg Config) (*Sandbox, error) {
	if cfg.Dir == "" {
		return nil, errors.New("sandbox: no data directory")
	}
	if cfg.NameServerAddr == "" {
		cfg.NameServerAddr = "127.0.0.1:0"
	}
	if len(cfg.ChunkserverAddrs) != 0 && len(cfg.ChunkserverAddrs) != cfg.Chunkservers {
		return nil, fmt.Errorf("sandbox: %d chunkserver addresses for %d chunkservers", len(cfg.ChunkserverAddrs), cfg.Chunkservers)
	}
	s := &Sandbox{cfg: cfg, chunkservers: make([]*runningChunkserver, cfg.Chunkservers),
		csAddrs: make([]string, cfg.Chunkservers)}
	if !cfg.Insecure {
		if err := s.loadCerts(); err != nil {
			return nil, err
		}
	}
	if err := s.startNameServer(cfg.NameServerAddr); err != nil {
		return nil, err
	}
	for i := range cfg.Chunkservers {
		addr := "127.0.0.1:0"
		if len(cfg.ChunkserverAddrs) > 0 {
			addr = cfg.ChunkserverAddrs[i]
		}
		if err := s.startChunkserver(i, addr); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	if err := s.waitReady(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// readyTimeout bounds how long Start and the restarts wait for the
// running chunkservers to register.
const readyTimeout = 30 * time.Second

// waitReady waits until the nameserver counts every running chunkserver
// as live, so a block can be placed on any of them as soon as Start (or a
// restart) returns. Registration happens in the chunkservers' own
// goroutines and the nameserver offers nothing to wait on, so this polls.
func (s *Sandbox) waitReady() error {
	want := 0
	for _, cs := range s.chunkservers {
		if cs != nil {
			want++
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for s.ns.LiveChunkservers() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %d of %d chunkservers registered within %v", s.ns.LiveChunkservers(), want, readyTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// NameServerConfig is the configuration the nameserver runs with.
func (s *Sandbox) NameServerConfig() nameserver.Config {
	cfg := nameserver.DefaultConfig()
	cfg.DataDir = filepath.Join(s.cfg.Dir, "nameserver")
	cfg.MetricsAddr = ""
	cfg.TLS, cfg.Insecure = s.node, s.cfg.Insecure
	if s.cfg.NameServer != nil {
		s.cfg.NameServer(&cfg)
	}
	return cfg
}

func (s *Sandbox) startNameServer(addr string) error {
	srv, err := nameserver.New(s.NameServerConfig())
	if err != nil {
		return fmt.Errorf("sandbox: nameserver: %w", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		return fmt.Errorf("sandbox: nameserver listener: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ns, s.cancel, s.NameServerAddr = srv, cancel, lis.Addr().String()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ctx, lis); err != nil {
			s.fail(fmt.Errorf("sandbox: nameserver: %w", err))
		}
	}()
	return nil
}

func (s *Sandbox) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

// NameServer returns the running nameserver.
func (s *Sandbox) NameServer() *nameserver.Server { return s.ns }

// RestartNameServer stops the nameserver and starts a new one on the same
// data and address, and waits for the running chunkservers to register
// with it again.
func (s *Sandbox) RestartNameServer() error {
	if err := s.stopNameServer(); err != nil {
		return err
	}
	if err := s.startNameServer(s.NameServerAddr); err != nil {
		return err
	}
	return s.waitReady()
}

func (s *Sandbox) stopNameServer() error {
	if s.ns == nil {
		return nil
	}
	s.cancel()
	err := s.ns.Close()
	s.wg.Wait()
	s.ns = nil
	return err
}

// Close stops every daemon and returns the first error any of them had.
func (s *Sandbox) Close() error {
	var errs []error
	for i := range s.chunkservers {
		errs = append(errs, s.StopChunkserver(i))
	}
	err := errors.Join(append(errs, s.stopNameServer())...)
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(append(s.errs, err)...)
}
