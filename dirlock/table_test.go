package dirlock

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bfs-go/bfs/internal/fspath"
)

// TestRandomOperationsKeepI1 drives a table with random lock, unlock and
// cleaned steps over a small tree and checks invariant I1 after each: no
// two locks on one ancestor chain belong to different sessions, and a
// granted lock's epoch is larger than every earlier one.
func TestRandomOperationsKeepI1(t *testing.T) {
	paths := []string{"/", "/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f"}
	sessions := []SessionID{"s1", "s2", "s3"}
	r := rand.New(rand.NewPCG(1, 2))
	m := struct {
		table *Table
		epoch Epoch
	}{table: NewTable()}
	for step := range 20000 {
		p := paths[r.IntN(len(paths))]
		s := sessions[r.IntN(len(sessions))]
		switch r.IntN(4) {
		case 0, 1:
			before := m.epoch
			held, err := m.table.CanLock(p, s)
			if err == nil && held == nil {
				m.epoch++
				m.table.Set(Lock{Path: p, Status: Locked, Session: s, Epoch: m.epoch})
			}
			if m.epoch < before {
				t.Fatalf("epoch went back")
			}
		case 2:
			l, err := m.table.CanUnlock(p, s, r.IntN(2) == 0, 0)
			if err == nil {
				for _, sub := range m.table.Subtree(l.Path) {
					sub.Status = Cleaning
					m.table.Set(sub)
				}
			} else if !errors.Is(err, ErrUnlocked) && !errors.Is(err, ErrLocked) && !errors.Is(err, ErrCleaning) {
				t.Fatalf("unexpected unlock error %v", err)
			}
		case 3:
			if l, ok := m.table.Get(p); ok && l.Status == Cleaning {
				for _, sub := range m.table.Subtree(p) {
					m.table.Remove(sub.Path)
				}
			}
		}
		all := m.table.List("/", false, 0)
		for _, x := range all {
			for _, y := range all {
				if x.Path != y.Path && fspath.Within(y.Path, x.Path) && x.Session != y.Session {
					t.Fatalf("step %d: I1 broken: %s (%s) above %s (%s)", step, x.Path, x.Session, y.Path, y.Session)
				}
			}
		}
	}
}

func TestCheckWithoutLocksIsCheap(t *testing.T) {
	tbl := NewTable()
	allocs := testing.AllocsPerRun(100, func() {
		if err := tbl.Check("/a/b/c/d/e", "s"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Check allocates %v times", allocs)
	}
}

func BenchmarkCheck(b *testing.B) {
	tbl := NewTable()
	for i := range 10000 {
		tbl.Set(Lock{Path: "/tera/t" + string(rune('a'+i%26)) + "/x" + string(rune(i)), Status: Locked, Session: "s"})
	}
	b.ResetTimer()
	for range b.N {
		_ = tbl.Check("/tera/tq/x5/lg0/file", "s")
	}
}
