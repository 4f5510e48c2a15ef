package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/internal/certs"
)

type runningChunkserver struct {
	srv    *chunkserver.Server
	addr   string
	web    *web // its HTTP port, with Config.HTTP
	cancel context.CancelFunc
	served chan error
}

// ChunkserverConfig is the configuration chunkserver i runs with.
func (s *Sandbox) ChunkserverConfig(i int) chunkserver.Config {
	cfg := chunkserver.DefaultConfig()
	cfg.DataDir = filepath.Join(s.cfg.Dir, fmt.Sprintf("chunkserver-%d", i))
	cfg.NameServerAddr = s.NameServerAddr
	cfg.MetricsAddr = ""
	cfg.TLS, cfg.Insecure = s.chunkserverCreds(i), s.cfg.Insecure
	if s.cfg.Chunkserver != nil {
		s.cfg.Chunkserver(i, &cfg)
	}
	return cfg
}

// chunkserverCreds is chunkserver i's certificate; nil when insecure.
func (s *Sandbox) chunkserverCreds(i int) *certs.Creds {
	if i < len(s.csNodes) {
		return s.csNodes[i]
	}
	return nil
}

func (s *Sandbox) startChunkserver(i int, addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sandbox: chunkserver %d listener: %w", i, err)
	}
	cfg := s.ChunkserverConfig(i)
	cfg.AdvertiseAddr = lis.Addr().String()
	srv, err := chunkserver.New(cfg)
	if err != nil {
		lis.Close()
		return fmt.Errorf("sandbox: chunkserver %d: %w", i, err)
	}
	cs := &runningChunkserver{srv: srv, addr: lis.Addr().String(), served: make(chan error, 1)}
	if s.cfg.HTTP {
		if cs.web, err = serveHTTP(s.httpAddr(s.cfg.NameServers+i), srv.HTTPHandler(), s.chunkserverCreds(i)); err != nil {
			lis.Close()
			srv.Close()
			return fmt.Errorf("sandbox: chunkserver %d: %w", i, err)
		}
		s.httpAddrs[s.cfg.NameServers+i] = cs.web.addr
	}
	ctx, cancel := context.WithCancel(context.Background())
	cs.cancel = cancel
	go func() { cs.served <- srv.Serve(ctx, lis) }()
	s.chunkservers[i] = cs
	s.csAddrs[i] = cs.addr
	return nil
}

// ChunkserverAddrs returns the addresses of the running chunkservers ("" for
// a stopped one).
func (s *Sandbox) ChunkserverAddrs() []string {
	out := make([]string, len(s.chunkservers))
	for i, cs := range s.chunkservers {
		if cs != nil {
			out[i] = cs.addr
		}
	}
	return out
}

// Chunkserver returns chunkserver i, nil if it is stopped.
func (s *Sandbox) Chunkserver(i int) *chunkserver.Server {
	if cs := s.chunkservers[i]; cs != nil {
		return cs.srv
	}
	return nil
}

// StopChunkserver stops chunkserver i (its data stays).
func (s *Sandbox) StopChunkserver(i int) error {
	cs := s.chunkservers[i]
	if cs == nil {
		return nil
	}
	s.chunkservers[i] = nil
	cs.cancel()
	err := errors.Join(cs.web.close(), cs.srv.Close())
	if serr := <-cs.served; err == nil {
		err = serr
	}
	return err
}

// RestartChunkserver (stops and) starts chunkserver i again on its data
// and address, and waits until it has registered.
func (s *Sandbox) RestartChunkserver(i int) error {
	if err := s.StopChunkserver(i); err != nil {
		return err
	}
	if err := s.startChunkserver(i, s.csAddrs[i]); err != nil {
		return err
	}
	return s.waitReady()
}
