package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/nameserver/replica"
)

type runningNameServer struct {
	srv    *nameserver.Server
	web    *web // its HTTP port, with Config.HTTP
	cancel context.CancelFunc
	served chan error
}

// NameServerName is the name (--id) of nameserver i.
func NameServerName(i int) string { return fmt.Sprintf("ns%d", i+1) }

// NameServerConfig is the configuration nameserver i runs with.
func (s *Sandbox) NameServerConfig(i int) nameserver.Config {
	cfg := nameserver.DefaultConfig()
	cfg.DataDir = filepath.Join(s.cfg.Dir, "nameserver")
	if s.cfg.NameServers > 1 {
		cfg.DataDir = filepath.Join(s.cfg.Dir, fmt.Sprintf("nameserver-%d", i))
	}
	cfg.Name = NameServerName(i)
	cfg.MetricsAddr = ""
	cfg.TLS, cfg.Insecure = s.node, s.cfg.Insecure
	if s.cfg.NameServers > 1 {
		for j, a := range s.advertised {
			cfg.InitialCluster = append(cfg.InitialCluster, replica.Peer{Name: NameServerName(j), Address: a})
		}
	}
	if s.cfg.NameServer != nil {
		s.cfg.NameServer(i, &cfg)
	}
	return cfg
}

// startGroup picks every nameserver's addresses, then starts them all:
// each must know the others' raft addresses to bootstrap the group.
func (s *Sandbox) startGroup() error {
	n := s.cfg.NameServers
	s.nameservers = make([]*runningNameServer, n)
	s.nsAddrs, s.raftAddrs, s.advertised = make([]string, n), make([]string, n), make([]string, n)
	clients, rafts := make([]net.Listener, n), make([]net.Listener, n)
	closeAll := func() {
		for i := range n {
			for _, l := range []net.Listener{clients[i], rafts[i]} {
				if l != nil {
					l.Close()
				}
			}
		}
	}
	for i := range n {
		addr, raftAddr := "127.0.0.1:0", "127.0.0.1:0"
		switch {
		case len(s.cfg.NameServerAddrs) > 0:
			addr = s.cfg.NameServerAddrs[i]
		case i == 0:
			addr = s.cfg.NameServerAddr
		}
		if len(s.cfg.RaftAddrs) > 0 {
			raftAddr = s.cfg.RaftAddrs[i]
		}
		var err error
		if clients[i], err = net.Listen("tcp", addr); err != nil {
			closeAll()
			return fmt.Errorf("sandbox: nameserver %d listener: %w", i, err)
		}
		if rafts[i], err = net.Listen("tcp", raftAddr); err != nil {
			closeAll()
			return fmt.Errorf("sandbox: nameserver %d raft listener: %w", i, err)
		}
		s.nsAddrs[i], s.raftAddrs[i] = clients[i].Addr().String(), rafts[i].Addr().String()
		s.advertised[i] = s.raftAddrs[i]
		if s.cfg.RaftFront != nil {
			if s.advertised[i], err = s.cfg.RaftFront(NameServerName(i), s.raftAddrs[i]); err != nil {
				closeAll()
				return fmt.Errorf("sandbox: nameserver %d raft front: %w", i, err)
			}
		}
	}
	s.NameServerAddr = strings.Join(s.nsAddrs, ",")
	for i := range n {
		if err := s.serveNameServer(i, clients[i], rafts[i]); err != nil {
			clients[i], rafts[i] = nil, nil // closed by serveNameServer
			closeAll()
			return err
		}
		clients[i], rafts[i] = nil, nil
	}
	return s.waitLeader()
}

func (s *Sandbox) serveNameServer(i int, client, raftLis net.Listener) error {
	cfg := s.NameServerConfig(i)
	cfg.RaftListener = raftLis
	cfg.RaftAdvertise = s.advertised[i]
	srv, err := nameserver.New(cfg)
	if err != nil {
		client.Close()
		raftLis.Close()
		return fmt.Errorf("sandbox: nameserver %d: %w", i, err)
	}
	ns := &runningNameServer{srv: srv, served: make(chan error, 1)}
	if s.cfg.HTTP {
		if ns.web, err = serveHTTP(s.httpAddr(i), srv.HTTPHandler(), s.node); err != nil {
			client.Close()
			srv.Close()
			return fmt.Errorf("sandbox: nameserver %d: %w", i, err)
		}
		s.httpAddrs[i] = ns.web.addr
	}
	ctx, cancel := context.WithCancel(context.Background())
	ns.cancel = cancel
	go func() { ns.served <- srv.Serve(ctx, client) }()
	s.nameservers[i] = ns
	return nil
}

// waitLeader waits until a running nameserver leads the group.
func (s *Sandbox) waitLeader() error {
	deadline := time.Now().Add(readyTimeout)
	for s.Leader() == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: no nameserver leads the group after %v", readyTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// NameServer returns the nameserver leading the group, or, while none
// does, the first one running.
func (s *Sandbox) NameServer() *nameserver.Server {
	if l := s.Leader(); l != nil {
		return l
	}
	for _, ns := range s.nameservers {
		if ns != nil {
			return ns.srv
		}
	}
	return nil
}

// NameServerAt returns nameserver i, nil if it is stopped.
func (s *Sandbox) NameServerAt(i int) *nameserver.Server {
	if ns := s.nameservers[i]; ns != nil {
		return ns.srv
	}
	return nil
}

// Leader returns the nameserver whose leadership term is in office, nil
// if none.
func (s *Sandbox) Leader() *nameserver.Server {
	for _, ns := range s.nameservers {
		if ns != nil && ns.srv.Leading() {
			return ns.srv
		}
	}
	return nil
}

// LeaderIndex returns the index of the leading nameserver, -1 if none.
func (s *Sandbox) LeaderIndex() int {
	for i, ns := range s.nameservers {
		if ns != nil && ns.srv.Leading() {
			return i
		}
	}
	return -1
}

// NameServerAddrs returns the client addresses of the nameservers.
func (s *Sandbox) NameServerAddrs() []string { return append([]string(nil), s.nsAddrs...) }

// StopNameServer stops nameserver i (its data stays).
func (s *Sandbox) StopNameServer(i int) error {
	ns := s.nameservers[i]
	if ns == nil {
		return nil
	}
	s.nameservers[i] = nil
	ns.cancel()
	err := errors.Join(ns.web.close(), ns.srv.Close())
	if serr := <-ns.served; err == nil {
		err = serr
	}
	return err
}

// StartNameServer starts a stopped nameserver i again on its data and
// addresses.
func (s *Sandbox) StartNameServer(i int) error {
	if s.nameservers[i] != nil {
		return nil
	}
	client, err := net.Listen("tcp", s.nsAddrs[i])
	if err != nil {
		return fmt.Errorf("sandbox: nameserver %d listener: %w", i, err)
	}
	raftLis, err := net.Listen("tcp", s.raftAddrs[i])
	if err != nil {
		client.Close()
		return fmt.Errorf("sandbox: nameserver %d raft listener: %w", i, err)
	}
	return s.serveNameServer(i, client, raftLis)
}

// RestartNameServer stops every nameserver and starts them again on
// their data and addresses, and waits until one leads and the running
// chunkservers have registered with it.
func (s *Sandbox) RestartNameServer() error {
	for i := range s.nameservers {
		if err := s.StopNameServer(i); err != nil {
			return err
		}
	}
	for i := range s.nameservers {
		if err := s.StartNameServer(i); err != nil {
			return err
		}
	}
	if err := s.waitLeader(); err != nil {
		return err
	}
	return s.waitReady()
}
