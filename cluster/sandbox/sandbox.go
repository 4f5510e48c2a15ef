// Package sandbox runs a whole BFS cluster in one process on loopback: a
// group of nameservers (one by default) and N chunkservers, each with its
// data under one folder, and with Config.HTTP each serving its HTTP port
// (metrics, the nameservers' status page) on a listener the sandbox
// opens, so a free port is known once bound. The `bfs sandbox` command,
// bfsbench and the test cluster are built on it.
//
// A sandbox is secure unless Config.Insecure says otherwise: the first
// start on a folder makes a CA (its key in ca.key) and, in certs/, node
// certificates for loopback and the listen addresses' hosts (node.crt
// with the nameserver role for the nameservers, chunkserver-I.crt with
// the chunkserver role for each chunkserver), a client certificate
// (certs.ClientUser) and an admin certificate (certs.AdminUser); every
// daemon then serves mutual TLS with them, the nameservers' Raft links
// included. Later starts use what is there (and make what is missing).
package sandbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
)

// Config says what to start.
type Config struct {
	// Dir holds every daemon's data (nameserver/ or nameserver-N/,
	// chunkserver-N/).
	Dir string
	// NameServers is how many nameservers form the group (0 means 1).
	NameServers int
	// NameServerAddr is where the first nameserver listens for clients;
	// "127.0.0.1:0" picks a free port (the others always do).
	NameServerAddr string
	// NameServerAddrs and RaftAddrs, if set, are every nameserver's client
	// and peer addresses (one per nameserver; NameServerAddrs replaces
	// NameServerAddr). By default each picks free ports, kept across
	// restarts of this Sandbox; a sandbox started again on the same Dir
	// needs the same raft addresses (the group stored them).
	NameServerAddrs, RaftAddrs []string
	// RaftFront, if set, puts something in front of nameserver i's Raft
	// listener at addr (a test's proxy, cluster/faultnet) and returns the
	// address its peers must dial instead.
	RaftFront func(name, addr string) (string, error)
	// NameServer adjusts nameserver i's configuration before it starts.
	NameServer func(i int, cfg *nameserver.Config)
	// Chunkservers is how many chunkservers to start.
	Chunkservers int
	// ChunkserverAddrs, if set, are their listen addresses (one per
	// chunkserver); by default each picks a free port on 127.0.0.1.
	ChunkserverAddrs []string
	// Chunkserver adjusts chunkserver i's configuration before it starts.
	Chunkserver func(i int, cfg *chunkserver.Config)
	// HTTP has every daemon serve its HTTP port: Prometheus metrics at
	// /metrics, and the nameservers their status page at /. HTTPAddrs, if
	// set, are where: the nameservers' first, then one per chunkserver;
	// by default (or where one is "") a free port on 127.0.0.1.
	HTTP      bool
	HTTPAddrs []string
	// Insecure runs every daemon in plaintext, without certificates.
	Insecure bool
}

// Sandbox is a running cluster.
type Sandbox struct {
	cfg Config
	// NameServerAddr is what clients dial: the nameservers' client
	// addresses, comma-separated.
	NameServerAddr string
	// node is the nameservers' certificate, csNodes each chunkserver's,
	// client the client's; nil when insecure.
	node, client *certs.Creds
	csNodes      []*certs.Creds

	// nameservers are indexed like Config.NameServers; a stopped one is
	// nil until restarted.
	nameservers []*runningNameServer
	// nsAddrs and raftAddrs are the addresses each nameserver listens on
	// for clients and for its peers, kept across restarts; advertised the
	// addresses its peers dial (raftAddrs, or what RaftFront put there).
	nsAddrs, raftAddrs, advertised []string
	// chunkservers are indexed like Config.Chunkservers; a stopped one is
	// nil until restarted.
	chunkservers []*runningChunkserver
	// csAddrs are the addresses chunkservers last listened on.
	csAddrs []string
	// httpAddrs are where each daemon's HTTP port last listened (with
	// Config.HTTP): the nameservers' first, then the chunkservers'.
	httpAddrs []string
}

// Start starts the cluster. Close stops it.
func Start(cfg Config) (*Sandbox, error) {
	if cfg.Dir == "" {
		return nil, errors.New("sandbox: no data directory")
	}
	if cfg.NameServerAddr == "" {
		cfg.NameServerAddr = "127.0.0.1:0"
	}
	cfg.NameServers = max(cfg.NameServers, 1)
	for _, l := range [][]string{cfg.NameServerAddrs, cfg.RaftAddrs} {
		if len(l) != 0 && len(l) != cfg.NameServers {
			return nil, fmt.Errorf("sandbox: %d nameserver addresses for %d nameservers", len(l), cfg.NameServers)
		}
	}
	if len(cfg.ChunkserverAddrs) != 0 && len(cfg.ChunkserverAddrs) != cfg.Chunkservers {
		return nil, fmt.Errorf("sandbox: %d chunkserver addresses for %d chunkservers", len(cfg.ChunkserverAddrs), cfg.Chunkservers)
	}
	if len(cfg.HTTPAddrs) != 0 && len(cfg.HTTPAddrs) != cfg.NameServers+cfg.Chunkservers {
		return nil, fmt.Errorf("sandbox: %d HTTP addresses for %d nameservers and %d chunkservers", len(cfg.HTTPAddrs), cfg.NameServers, cfg.Chunkservers)
	}
	s := &Sandbox{cfg: cfg, chunkservers: make([]*runningChunkserver, cfg.Chunkservers),
		csAddrs: make([]string, cfg.Chunkservers), httpAddrs: make([]string, cfg.NameServers+cfg.Chunkservers)}
	if !cfg.Insecure {
		if err := s.loadCerts(); err != nil {
			return nil, err
		}
	}
	if err := s.startGroup(); err != nil {
		return nil, errors.Join(err, s.Close())
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

// waitReady waits until a nameserver leads and counts every running
// chunkserver as live, so a block can be placed on any of them as soon
// as Start (or a restart) returns. Registration happens in the
// chunkservers' own goroutines and the nameserver offers nothing to wait
// on, so this polls.
func (s *Sandbox) waitReady() error {
	want := 0
	for _, cs := range s.chunkservers {
		if cs != nil {
			want++
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		live := 0
		if ns := s.Leader(); ns != nil {
			live = ns.LiveChunkservers()
			if live >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %d of %d chunkservers registered with a leader within %v", live, want, readyTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Close stops every daemon and returns the first error any of them had.
func (s *Sandbox) Close() error {
	var errs []error
	for i := range s.chunkservers {
		errs = append(errs, s.StopChunkserver(i))
	}
	for i := range s.nameservers {
		errs = append(errs, s.StopNameServer(i))
	}
	return errors.Join(errs...)
}
