// Package sandbox runs a whole BFS cluster in one process on loopback: a
// nameserver and N chunkservers, each with its data under one folder, and
// with Config.HTTP each serving its HTTP port (metrics, the nameserver's
// status page) on a listener the sandbox opens, so a free port is known
// once bound. The `bfs sandbox` command, bfsbench and the test cluster
// are built on it.
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
	// HTTP has every daemon serve its HTTP port: Prometheus metrics at
	// /metrics, and the nameserver its status page at /. HTTPAddrs, if
	// set, are where: the nameserver's first, then one per chunkserver;
	// by default (or where one is "") a free port on 127.0.0.1.
	HTTP      bool
	HTTPAddrs []string
}

// Sandbox is a running cluster.
type Sandbox struct {
	cfg Config
	// NameServerAddr is the address clients dial.
	NameServerAddr string

	ns     *nameserver.Server
	cancel context.CancelFunc
	// chunkservers are indexed like Config.Chunkservers; a stopped one is
	// nil until restarted.
	chunkservers []*runningChunkserver
	// csAddrs are the addresses chunkservers last listened on.
	csAddrs []string
	// nsWeb serves the nameserver's HTTP port (with Config.HTTP);
	// httpAddrs are where each daemon's last listened (the nameserver's
	// first), "" for none.
	nsWeb     *web
	httpAddrs []string
	wg        sync.WaitGroup
	mu        sync.Mutex
	errs      []error
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
	if len(cfg.HTTPAddrs) != 0 && len(cfg.HTTPAddrs) != 1+cfg.Chunkservers {
		return nil, fmt.Errorf("sandbox: %d HTTP addresses for a nameserver and %d chunkservers", len(cfg.HTTPAddrs), cfg.Chunkservers)
	}
	s := &Sandbox{cfg: cfg, chunkservers: make([]*runningChunkserver, cfg.Chunkservers),
		csAddrs: make([]string, cfg.Chunkservers), httpAddrs: make([]string, 1+cfg.Chunkservers)}
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
	if s.cfg.HTTP {
		if s.nsWeb, err = serveHTTP(s.httpAddr(0), srv.HTTPHandler()); err != nil {
			lis.Close()
			srv.Close()
			return fmt.Errorf("sandbox: nameserver: %w", err)
		}
		s.httpAddrs[0] = s.nsWeb.addr
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
	err := errors.Join(s.nsWeb.close(), s.ns.Close())
	s.wg.Wait()
	s.ns, s.nsWeb = nil, nil
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
