package replica

import (
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// BenchmarkGroupCommit measures the commit pipeline alone, without gRPC
// or a client: 64 goroutines propose small commands (a mkdir each) to the
// leader of a group of one or three nodes on loopback, each node with its
// log and namespace on disk in b.TempDir() (one disk for all, as bfsbench
// ha runs them), each proposal returning once the leader has applied it.
// Set beside bfsbench ha's creates and lock cycles, it tells how much of
// their cost is the commit pipeline.
func BenchmarkGroupCommit(b *testing.B) {
	for _, voters := range []int{1, 3} {
		b.Run(fmt.Sprintf("voters=%d", voters), func(b *testing.B) {
			leader := openBenchGroup(b, voters)
			var seq atomic.Int64
			b.SetParallelism(32) // 64 proposers on two cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p := fmt.Sprintf("/d%d", seq.Add(1))
					if _, err := leader.Propose(&bfspb.Command{Op: &bfspb.Command_Mkdir{Mkdir: &bfspb.MkdirCmd{Path: p, Mode: 0o755}}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(seq.Load())/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// openBenchGroup opens a group of n nodes and returns its leader, with
// the namespace formatted.
func openBenchGroup(b *testing.B, n int) *Node {
	b.Helper()
	dir := b.TempDir()
	lis := make([]net.Listener, n)
	var peers []Peer
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lis[i] = l
		peers = append(peers, Peer{Name: fmt.Sprintf("n%d", i), Address: l.Addr().String()})
	}
	if n == 1 {
		peers = nil
	}
	nodes := make([]*Node, n)
	leaders := make(chan int, n)
	for i := range n {
		store, err := namespace.Open(namespace.Options{Dir: filepath.Join(dir, fmt.Sprintf("ns%d", i))})
		if err != nil {
			b.Fatal(err)
		}
		node, err := Open(Config{
			Dir: filepath.Join(dir, fmt.Sprintf("raft%d", i)), Name: fmt.Sprintf("n%d", i), RaftAddress: lis[i].Addr().String(),
			Listener: lis[i], InitialCluster: peers,
			OnLeadership: func(leader bool, _ uint64) {
				if leader {
					select {
					case leaders <- i:
					default:
					}
				}
			},
			OnFatal: func(err error) { b.Error(err) },
		}, store)
		if err != nil {
			b.Fatal(err)
		}
		node.Start()
		nodes[i] = node
		b.Cleanup(func() {
			if err := node.Close(); err != nil {
				b.Error(err)
			}
			if err := store.Close(); err != nil {
				b.Error(err)
			}
		})
	}
	var leader *Node
	select {
	case i := <-leaders:
		leader = nodes[i]
	case <-time.After(30 * time.Second):
		b.Fatal("no leader after 30s")
	}
	id, err := namespace.NewClusterID()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := leader.Propose(&bfspb.Command{Op: &bfspb.Command_Format{Format: &bfspb.FormatCmd{ClusterId: id}}}); err != nil {
		b.Fatal(err)
	}
	return leader
}
