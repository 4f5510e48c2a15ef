package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftbench "github.com/hashicorp/raft/bench"
)

// BenchmarkStoreLogs measures StoreLogs with raft-sized batches; every
// call is one batch and one fsync. entries/s is what a follower (or the
// leader's own log) can take at that batch size.
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := openTestStore(b, b.TempDir())
			data := make([]byte, 256)
			now := time.Now()
			logs := make([]*raft.Log, batch)
			next := uint64(1)
			b.SetBytes(int64(batch * len(data)))
			for b.Loop() {
				for i := range logs {
					logs[i] = &raft.Log{Index: next, Term: 1, Data: data, AppendedAt: now}
					next++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkRaftBench runs raft's shared store benchmarks (raft/bench).
// Its StoreLog and DeleteRange write index 0, which raft never writes and
// this store refuses, so they are left out.
func BenchmarkRaftBench(b *testing.B) {
	for name, bench := range map[string]func(*testing.B, *LogStore){
		"FirstIndex": func(b *testing.B, s *LogStore) { raftbench.FirstIndex(b, s) },
		"LastIndex":  func(b *testing.B, s *LogStore) { raftbench.LastIndex(b, s) },
		"GetLog":     func(b *testing.B, s *LogStore) { raftbench.GetLog(b, s) },
		"StoreLogs":  func(b *testing.B, s *LogStore) { raftbench.StoreLogs(b, s) },
		"Set":        func(b *testing.B, s *LogStore) { raftbench.Set(b, s) },
		"Get":        func(b *testing.B, s *LogStore) { raftbench.Get(b, s) },
		"SetUint64":  func(b *testing.B, s *LogStore) { raftbench.SetUint64(b, s) },
		"GetUint64":  func(b *testing.B, s *LogStore) { raftbench.GetUint64(b, s) },
	} {
		b.Run(name, func(b *testing.B) { bench(b, openTestStore(b, b.TempDir())) })
	}
}
