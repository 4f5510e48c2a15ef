package namespace

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkCreateDelete measures durable create+delete pairs straight on
// the store (no RPC), with b.SetParallelism goroutines per CPU.
func BenchmarkCreateDelete(b *testing.B) {
	for _, par := range []int{1, 32} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := mkdir(s, "/d", false); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p := fmt.Sprintf("/d/f%d", n.Add(1))
					if err := create(s, p, false); err != nil {
						b.Error(err)
						return
					}
					if err := del(s, p); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkStat measures Stat of a file six directories deep, the shape
// of a table store's tablet files.
func BenchmarkStat(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const dir = "/table/t1/tablet0001/lg0/data"
	if err := mkdir(s, dir, true); err != nil {
		b.Fatal(err)
	}
	if err := create(s, dir+"/f", false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Stat(dir + "/f"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
