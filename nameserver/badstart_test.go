package nameserver

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/nameserver/replica"
)

// freeAddr returns an address on loopback nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// dirState lists the files under dir with their sizes, to show a refused
// start changed nothing.
func dirState(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && filepath.Base(p) != "LOCK" {
			out[p] = fi.Size()
		}
		return nil
	}))
	return out
}

// TestBadStartsAreRefused: a start that would put a member in the wrong
// group is refused with a message saying what to check, and changes
// nothing stored.
func TestBadStartsAreRefused(t *testing.T) {
	a, b := freeAddr(t), freeAddr(t)
	t.Run("a name given twice", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.MetricsAddr, cfg.RaftListen, cfg.Insecure = t.TempDir(), "", a, true
		cfg.InitialCluster = []replica.Peer{{Name: "ns1", Address: a}, {Name: "ns1", Address: b}}
		_, err := New(cfg)
		require.ErrorContains(t, err, `names "ns1" twice`)
	})
	t.Run("an address given twice", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.MetricsAddr, cfg.RaftListen, cfg.Insecure = t.TempDir(), "", a, true
		cfg.InitialCluster = []replica.Peer{{Name: "ns1", Address: a}, {Name: "ns2", Address: a}}
		_, err := New(cfg)
		require.ErrorContains(t, err, "gives the address "+a+" twice")
	})
	t.Run("a cluster that does not name this node", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.MetricsAddr, cfg.RaftListen, cfg.Insecure = t.TempDir(), "", a, true
		cfg.InitialCluster = []replica.Peer{{Name: "ns2", Address: b}, {Name: "ns3", Address: freeAddr(t)}}
		_, err := New(cfg)
		require.ErrorContains(t, err, "does not name this node")
	})

	// A group of one that ran, then starts again in ways that contradict
	// what it stored.
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.MetricsAddr, cfg.Insecure = dir, "", true
	s, _ := startLone(t, cfg)
	openSession(t, s, "kept")
	require.NoError(t, s.Close())
	before := dirState(t, dir)

	t.Run("another name on its data directory", func(t *testing.T) {
		c := cfg
		c.Name, c.RaftListen = "other", a
		_, err := New(c)
		require.ErrorContains(t, err, "this node (other) is not one of them")
		require.ErrorContains(t, err, "check --data, --id and --raft-advertise")
	})
	t.Run("an initial cluster naming it elsewhere", func(t *testing.T) {
		c := cfg
		c.RaftListen = a
		c.InitialCluster = []replica.Peer{{Name: "ns1", Address: a}, {Name: "ns2", Address: b}}
		_, err := New(c)
		require.ErrorContains(t, err, "the group stored here knows ns1 at")
	})
	require.Equal(t, before, dirState(t, dir), "the refused starts changed nothing stored")

	t.Run("a namespace without a group bootstrapping three", func(t *testing.T) {
		c := cfg
		c.DataDir = t.TempDir()
		// The namespace of the group of one, without its Raft state.
		require.NoError(t, os.CopyFS(filepath.Join(c.DataDir, "namespace"), os.DirFS(filepath.Join(dir, "namespace"))))
		c.RaftListen = a
		c.InitialCluster = []replica.Peer{{Name: "ns1", Address: a}, {Name: "ns2", Address: b}, {Name: "ns3", Address: freeAddr(t)}}
		_, err := New(c)
		require.ErrorContains(t, err, "bootstrapped from empty directories only")
	})

	// And the group of one starts again as it was, on any port.
	c := cfg
	c.RaftListen = "127.0.0.1:0"
	s2, _ := startLone(t, c)
	sessions, err := s2.ns.Sessions()
	require.NoError(t, err)
	require.Len(t, sessions, 1)
}
