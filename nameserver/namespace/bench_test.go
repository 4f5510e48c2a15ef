package namespace

import (
	"fmt"
	"testing"
)

// BenchmarkCreateDelete measures create+delete pairs straight on the
// store (no RPC, no command log), applied one at a time as a log applies
// them: what the state machine costs per command.
func BenchmarkCreateDelete(b *testing.B) {
	s := open(b, b.TempDir())
	if err := mkdir(s, "/d", false); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		n++
		p := fmt.Sprintf("/d/f%d", n)
		if err := create(s, p, false); err != nil {
			b.Fatal(err)
		}
		if err := del(s, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStat measures Stat of a file six directories deep, the shape
// of a table store's tablet files.
func BenchmarkStat(b *testing.B) {
	s := open(b, b.TempDir())
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
