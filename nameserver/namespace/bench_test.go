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
