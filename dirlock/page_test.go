package dirlock

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bfs-go/bfs/internal/fspath"
)

// pageTable is a table over paths chosen to sit at the edges of prefix
// ranges: siblings that sort between a directory and its subtree
// ("/a-old", "/a.b"), and names that sort after it ("/a0", "/ab").
func pageTable() *Table {
	t := NewTable()
	paths := []string{"/", "/a", "/a-old", "/a.b", "/a/b", "/a/b/c", "/a/c", "/a0", "/ab", "/b", "/b/x"}
	for i, p := range paths {
		l := Lock{Path: p, Status: Locked, Holder: "h1", Session: "s1", Epoch: Epoch(i + 1)}
		if i%3 == 2 {
			l.Status, l.Holder, l.Session = Cleaning, "h2", "s2"
		}
		t.Set(l)
	}
	return t
}

func lockPaths(locks []Lock) []string {
	out := make([]string, 0, len(locks))
	for _, l := range locks {
		out = append(out, l.Path)
	}
	return out
}

func TestPage(t *testing.T) {
	tbl := pageTable()
	for _, tc := range []struct {
		q        Query
		want     []string
		wantNext string
	}{
		{Query{Limit: 100}, []string{"/", "/a", "/a-old", "/a.b", "/a/b", "/a/b/c", "/a/c", "/a0", "/ab", "/b", "/b/x"}, ""},
		{Query{Prefix: "/a", Limit: 100}, []string{"/a", "/a/b", "/a/b/c", "/a/c"}, ""},
		{Query{Prefix: "/a", Limit: 2}, []string{"/a", "/a/b"}, "/a/b"},
		{Query{Prefix: "/a", After: "/a/b", Limit: 2}, []string{"/a/b/c", "/a/c"}, ""},
		{Query{Prefix: "/a", After: "/a", Limit: 1}, []string{"/a/b"}, "/a/b"},
		// After a sibling that sorts between /a and /a/: the subtree goes on.
		{Query{Prefix: "/a", After: "/a-old", Limit: 100}, []string{"/a/b", "/a/b/c", "/a/c"}, ""},
		{Query{Prefix: "/a", After: "/a/c", Limit: 100}, nil, ""},
		{Query{Prefix: "/a/b", Limit: 100}, []string{"/a/b", "/a/b/c"}, ""},
		{Query{Prefix: "/zz", Limit: 100}, nil, ""},
		{Query{Prefix: "/a/x", Limit: 100}, nil, ""},
		{Query{After: "/", Limit: 1}, []string{"/a"}, "/a"},
		// Exactly full at the last match: no next page.
		{Query{Prefix: "/b", Limit: 2}, []string{"/b", "/b/x"}, ""},
		{Query{Status: Cleaning, Limit: 100}, []string{"/a-old", "/a/b/c", "/ab"}, ""},
		{Query{Status: Cleaning, Limit: 3}, []string{"/a-old", "/a/b/c", "/ab"}, ""},
		{Query{Status: Locked, Prefix: "/a", Limit: 100}, []string{"/a", "/a/b", "/a/c"}, ""},
		{Query{Holder: "h2", Limit: 100}, []string{"/a-old", "/a/b/c", "/ab"}, ""},
		{Query{Session: "s1", Prefix: "/a/b", Limit: 100}, []string{"/a/b"}, ""},
		{Query{Session: "nobody", Limit: 100}, nil, ""},
		// A scan bound ends the page where it stopped, even empty.
		{Query{Status: Cleaning, Limit: 100, Scan: 2}, nil, "/a"},
		{Query{Status: Cleaning, Limit: 100, Scan: 3}, []string{"/a-old"}, "/a-old"},
		{Query{Status: Cleaning, After: "/a/c", Limit: 100, Scan: 3}, []string{"/ab"}, "/b"},
		{Query{Status: Cleaning, After: "/ab", Limit: 100, Scan: 3}, nil, ""},
	} {
		t.Run(fmt.Sprintf("%+v", tc.q), func(t *testing.T) {
			got, next := tbl.Page(tc.q)
			if !slices.Equal(lockPaths(got), tc.want) || next != tc.wantNext {
				t.Errorf("got %v next %q, want %v next %q", lockPaths(got), next, tc.want, tc.wantNext)
			}
		})
	}
}

// TestPagesMatchList lists random tables page by page, with random page
// sizes, scan bounds and filters, and checks the pages add up to what a
// whole listing filtered in the test gives.
func TestPagesMatchList(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	names := []string{"a", "a-b", "a.b", "a0", "b", "ab"}
	randPath := func() string {
		p := ""
		for range 1 + r.IntN(3) {
			p += "/" + names[r.IntN(len(names))]
		}
		return p
	}
	for range 300 {
		tbl := NewTable()
		for range r.IntN(40) {
			st := Locked
			if r.IntN(3) == 0 {
				st = Cleaning
			}
			s := SessionID(fmt.Sprint("s", r.IntN(3)))
			tbl.Set(Lock{Path: randPath(), Status: st, Session: s, Holder: "h-" + string(s)})
		}
		q := Query{Prefix: fspath.Root, Limit: 1 + r.IntN(5), Scan: r.IntN(6)}
		if r.IntN(2) == 0 {
			q.Prefix = randPath()
		}
		switch r.IntN(4) {
		case 0:
			q.Status = Cleaning
		case 1:
			q.Session = "s1"
		case 2:
			q.Holder = "h-s2"
		}
		var want []string
		for _, l := range tbl.List(q.Prefix, false, 0) {
			if q.matches(&l) {
				want = append(want, l.Path)
			}
		}
		var got []string
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatalf("%+v: listing does not end", q)
			}
			locks, next := tbl.Page(q)
			if len(locks) > q.Limit {
				t.Fatalf("%+v: page of %d", q, len(locks))
			}
			got = append(got, lockPaths(locks)...)
			if next == "" {
				break
			}
			q.After = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%+v: pages gave %v, want %v", q, got, want)
		}
	}
}

// TestPagesAcrossChanges adds and removes locks between pages: every lock
// present for the whole listing is listed once, nothing is listed twice,
// and the order stays sorted.
func TestPagesAcrossChanges(t *testing.T) {
	tbl := NewTable()
	for i := range 100 {
		tbl.Set(Lock{Path: fmt.Sprintf("/t/%03d", i), Status: Locked, Session: "s"})
	}
	q := Query{Prefix: "/t", Limit: 7}
	var got []string
	for page := 0; ; page++ {
		locks, next := tbl.Page(q)
		got = append(got, lockPaths(locks)...)
		// Between pages: a lock added behind the cursor and one ahead of
		// it; an odd one (never listed before) removed ahead of it.
		tbl.Set(Lock{Path: fmt.Sprintf("/t/%03d-added", page*7), Status: Locked, Session: "s"})
		tbl.Set(Lock{Path: fmt.Sprintf("/t/%03d-ahead", page*7+50), Status: Locked, Session: "s"})
		tbl.Remove(fmt.Sprintf("/t/%03d", page*14+61))
		if next == "" {
			break
		}
		q.After = next
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Fatalf("not sorted or duplicated: %v", got)
	}
	for i := range 100 {
		p := fmt.Sprintf("/t/%03d", i)
		if _, ok := tbl.Get(p); ok && !slices.Contains(got, p) {
			t.Errorf("%s, present throughout, not listed", p)
		}
	}
}

func TestCounts(t *testing.T) {
	tbl := pageTable()
	if l, c := tbl.Counts(); l != 8 || c != 3 {
		t.Fatalf("counts %d locked, %d cleaning; want 8, 3", l, c)
	}
	tbl.Set(Lock{Path: "/a", Status: Cleaning}) // LOCKED → CLEANING
	tbl.Remove("/a-old")                        // a CLEANING one ends
	tbl.Remove("/b")                            // a LOCKED one ends
	tbl.Remove("/nothing")
	tbl.Set(Lock{Path: "/new", Status: Locked})
	if l, c := tbl.Counts(); l != 7 || c != 3 {
		t.Fatalf("counts %d locked, %d cleaning; want 7, 3", l, c)
	}
}

func TestHeldBy(t *testing.T) {
	tbl := NewTable()
	for i := range 3*heldScanChunk + 5 { // several chunks
		s := SessionID(fmt.Sprint("s", i%3))
		st := Locked
		if i%10 == 9 {
			st = Cleaning
		}
		tbl.Set(Lock{Path: fmt.Sprintf("/d/%06d", i), Status: st, Session: s})
	}
	paths, counts := tbl.HeldBy([]SessionID{"s0", "s2", "none"}, 4)
	want := map[SessionID]int{}
	for _, l := range tbl.List("/", true, Locked) {
		want[l.Session]++
	}
	if counts["s0"] != want["s0"] || counts["s2"] != want["s2"] || counts["s1"] != 0 || counts["none"] != 0 {
		t.Fatalf("counts %v, want s0 %d, s2 %d", counts, want["s0"], want["s2"])
	}
	if !slices.Equal(paths["s0"], []string{"/d/000000", "/d/000003", "/d/000006", "/d/000012"}) {
		t.Fatalf("s0 holds %v first", paths["s0"]) // 000009 is cleaning
	}
}

// BenchmarkPageAll lists a table of a million locks a page of 1,000 at a
// time; one op is the whole listing.
func BenchmarkPageAll(b *testing.B) {
	const n = 1_000_000
	tbl := NewTable()
	for i := range n {
		tbl.Set(Lock{Path: fmt.Sprintf("/scale/g%03d/t%07d", i/10000, i), Status: Locked, Session: "s"})
	}
	b.ResetTimer()
	for b.Loop() {
		q, seen := Query{Limit: 1000}, 0
		for {
			locks, next := tbl.Page(q)
			seen += len(locks)
			if next == "" {
				break
			}
			q.After = next
		}
		if seen != n {
			b.Fatalf("listed %d", seen)
		}
	}
}
