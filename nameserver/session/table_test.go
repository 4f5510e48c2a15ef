package session

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

func at(n int) time.Time { return t0.Add(sec(n)) }

func ids(ss []Session) []ID {
	out := make([]ID, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

// op is one step of a table transcript. Exactly one of its fields that
// names an action is set.
type op struct {
	grant  ID  // Grant(grant, ttl) at now
	ttl    int // seconds
	renew  ID  // Renew(renew) at now; wantErr is checked
	revoke ID  // Revoke(revoke); wantOK is checked
	expire bool
	now    int // seconds after t0

	wantErr error
	wantOK  bool
	want    []ID // sessions Expire returns, in order
}

func runOps(t *testing.T, tbl *Table, ops []op) {
	t.Helper()
	for i, o := range ops {
		now := at(o.now)
		switch {
		case o.grant != "":
			tbl.Grant(Session{ID: o.grant, TTL: sec(o.ttl)}, now)
		case o.renew != "":
			ttl, err := tbl.Renew(o.renew, now)
			if !errors.Is(err, o.wantErr) || (err == nil) != (o.wantErr == nil) {
				t.Fatalf("step %d: Renew(%s) at %ds = %v, want %v", i, o.renew, o.now, err, o.wantErr)
			}
			if s, _, _ := tbl.Get(o.renew); err == nil && ttl != s.TTL {
				t.Fatalf("step %d: Renew returned ttl %v, want %v", i, ttl, s.TTL)
			}
		case o.revoke != "":
			s, ok := tbl.Revoke(o.revoke)
			if ok != o.wantOK || (ok && s.ID != o.revoke) {
				t.Fatalf("step %d: Revoke(%s) = %v, %v; want ok %v", i, o.revoke, s.ID, ok, o.wantOK)
			}
		case o.expire:
			if got := ids(tbl.Expire(now)); !slices.Equal(got, o.want) {
				t.Fatalf("step %d: Expire at %ds = %v, want %v", i, o.now, got, o.want)
			}
		default:
			t.Fatalf("step %d: empty op", i)
		}
	}
}

func TestTable(t *testing.T) {
	tests := []struct {
		name string
		ops  []op
	}{
		{"expires in deadline order", []op{
			{grant: "c", ttl: 30},
			{grant: "a", ttl: 10},
			{grant: "b", ttl: 20, now: 5}, // deadline 25
			{grant: "d", ttl: 5, now: 1},  // deadline 6
			{expire: true, now: 5, want: nil},
			{expire: true, now: 6, want: []ID{"d"}}, // deadline == now is expired
			{expire: true, now: 100, want: []ID{"a", "b", "c"}},
			{expire: true, now: 200, want: nil},
		}},
		{"equal deadlines expire by id", []op{
			{grant: "z", ttl: 10},
			{grant: "m", ttl: 10},
			{grant: "b", ttl: 5, now: 5},
			{expire: true, now: 10, want: []ID{"b", "m", "z"}},
		}},
		{"renew extends", []op{
			{grant: "a", ttl: 10},
			{grant: "b", ttl: 10},
			{renew: "a", now: 9},
			{expire: true, now: 10, want: []ID{"b"}},
			{renew: "a", now: 18},
			{expire: true, now: 27, want: nil},
			{expire: true, now: 28, want: []ID{"a"}},
		}},
		{"renew at the deadline is late", []op{
			{grant: "a", ttl: 10},
			{renew: "a", now: 10, wantErr: ErrExpired},
			{expire: true, now: 10, want: []ID{"a"}},
		}},
		{"late renew does not resurrect", []op{
			{grant: "a", ttl: 10},
			{renew: "a", now: 50, wantErr: ErrExpired},
			{renew: "a", now: 50, wantErr: ErrExpired},
			{expire: true, now: 50, want: []ID{"a"}},
			{renew: "a", now: 50, wantErr: ErrNotFound},
		}},
		{"renew unknown", []op{
			{renew: "nope", wantErr: ErrNotFound},
		}},
		{"revoke", []op{
			{grant: "a", ttl: 10},
			{grant: "b", ttl: 20},
			{grant: "c", ttl: 30},
			{revoke: "b", wantOK: true},
			{revoke: "b", wantOK: false},
			{revoke: "nope", wantOK: false},
			{renew: "b", now: 1, wantErr: ErrNotFound},
			{expire: true, now: 100, want: []ID{"a", "c"}},
		}},
		{"revoke an expired session", []op{
			{grant: "a", ttl: 10},
			{revoke: "a", now: 20, wantOK: true},
			{expire: true, now: 20, want: nil},
		}},
		{"grant replaces", []op{
			{grant: "a", ttl: 10},
			{grant: "a", ttl: 100, now: 5},
			{expire: true, now: 50, want: nil},
			{expire: true, now: 105, want: []ID{"a"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runOps(t, NewTable(), tc.ops)
		})
	}
}

func TestTableNextDeadline(t *testing.T) {
	tbl := NewTable()
	want := func(n int, ok bool) {
		t.Helper()
		d, gotOK := tbl.NextDeadline()
		if gotOK != ok || (ok && !d.Equal(at(n))) {
			t.Fatalf("NextDeadline = %v, %v; want %v, %v", d, gotOK, at(n), ok)
		}
	}
	want(0, false)
	tbl.Grant(Session{ID: "a", TTL: sec(10)}, t0)
	want(10, true)
	tbl.Grant(Session{ID: "b", TTL: sec(5)}, t0)
	want(5, true)
	if _, err := tbl.Renew("b", at(4)); err != nil {
		t.Fatal(err)
	}
	want(9, true)
	if _, err := tbl.Renew("b", at(8)); err != nil {
		t.Fatal(err)
	}
	want(10, true) // a is now first
	tbl.Revoke("a")
	want(13, true)
	tbl.Expire(at(13))
	want(0, false)
}

func TestTableGetAndList(t *testing.T) {
	tbl := NewTable()
	for _, s := range []Session{
		{ID: "c", Holder: "h3", TTL: sec(30)},
		{ID: "a", Holder: "h1", TTL: sec(10)},
		{ID: "b", Holder: "h2", TTL: sec(20)},
	} {
		tbl.Grant(s, t0)
	}
	s, deadline, ok := tbl.Get("b")
	if !ok || s.Holder != "h2" || !deadline.Equal(at(20)) {
		t.Fatalf("Get(b) = %+v, %v, %v", s, deadline, ok)
	}
	if _, _, ok := tbl.Get("nope"); ok {
		t.Fatal("Get of an unknown id succeeded")
	}

	// At 10s, a is expired though not removed: List leaves it out.
	got := tbl.List(at(10))
	want := []Info{
		{Session: Session{ID: "b", Holder: "h2", TTL: sec(20)}, Remaining: sec(10)},
		{Session: Session{ID: "c", Holder: "h3", TTL: sec(30)}, Remaining: sec(20)},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	if tbl.Len() != 3 {
		t.Fatalf("Len = %d, want 3 (a is expired but not removed)", tbl.Len())
	}
}

func TestTableMonotonic(t *testing.T) {
	// time.Now carries a monotonic reading; stripping the wall clock of a
	// later reading must not change what is due.
	tbl := NewTable()
	now := time.Now()
	tbl.Grant(Session{ID: "a", TTL: time.Second}, now)
	later := now.Add(500 * time.Millisecond)
	if got := tbl.Expire(later); got != nil {
		t.Fatalf("Expire before the deadline = %v", got)
	}
	if _, err := tbl.Renew("a", later); err != nil {
		t.Fatal(err)
	}
	if got := ids(tbl.Expire(later.Add(time.Second))); !slices.Equal(got, []ID{"a"}) {
		t.Fatalf("Expire at the deadline = %v", got)
	}
}

// TestTableManySessions grants 10,000 sessions with random TTLs, renews a
// random half, and expires them in steps. Every session must come out once,
// in deadline order, and each Expire must cost O(log n) heap work per
// session it returns, not a pass over the table.
func TestTableManySessions(t *testing.T) {
	const n = 10_000
	rng := rand.New(rand.NewPCG(1, 2))
	tbl := NewTable()
	deadlines := make(map[ID]time.Time, n)
	id := func(i int) ID { return ID(fmt.Sprintf("s%05d", i)) }
	for i := range n {
		ttl := time.Duration(1+rng.IntN(600_000)) * time.Millisecond
		tbl.Grant(Session{ID: id(i), TTL: ttl}, t0)
		deadlines[id(i)] = t0.Add(ttl)
	}
	for i := range n {
		id, d := id(i), deadlines[id(i)]
		if rng.IntN(2) == 0 {
			continue
		}
		now := t0.Add(time.Duration(rng.Int64N(int64(d.Sub(t0)))))
		ttl, err := tbl.Renew(id, now)
		if err != nil {
			t.Fatal(err)
		}
		deadlines[id] = now.Add(ttl)
	}

	logN := int(math.Ceil(math.Log2(n)))
	var last time.Time
	seen := 0
	for now := t0; seen < n; now = now.Add(time.Second) {
		tbl.heap.compares = 0
		ended := tbl.Expire(now)
		if limit := 2 * logN * len(ended); tbl.heap.compares > limit {
			t.Fatalf("Expire of %d sessions did %d comparisons, more than %d",
				len(ended), tbl.heap.compares, limit)
		}
		for _, s := range ended {
			d, ok := deadlines[s.ID]
			switch {
			case !ok:
				t.Fatalf("%s expired twice", s.ID)
			case d.After(now):
				t.Fatalf("%s expired at %v before its deadline %v", s.ID, now, d)
			case d.Before(last):
				t.Fatalf("%s (deadline %v) expired after one with deadline %v", s.ID, d, last)
			}
			last = d
			delete(deadlines, s.ID)
			seen++
		}
		if next, ok := tbl.NextDeadline(); ok && !next.After(now) {
			t.Fatalf("after Expire(%v), a session is still due at %v", now, next)
		}
	}
	if tbl.Len() != 0 {
		t.Fatalf("Len = %d after everything expired", tbl.Len())
	}
}

func TestTableExpireNothingDueIsFree(t *testing.T) {
	tbl := NewTable()
	for i := range 1000 {
		tbl.Grant(Session{ID: ID(fmt.Sprint(i)), TTL: sec(10 + i)}, t0)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if tbl.Expire(at(5)) != nil {
			t.Fatal("nothing is due")
		}
	})
	if allocs != 0 {
		t.Fatalf("Expire with nothing due allocated %v times", allocs)
	}
	tbl.heap.compares = 0
	tbl.Expire(at(5))
	if tbl.heap.compares != 0 {
		t.Fatalf("Expire with nothing due did %d comparisons", tbl.heap.compares)
	}
}

// BenchmarkTableGrantExpire grants 50,000 sessions with random TTLs and
// expires them all, second by second; ns/session is the cost of one session's
// whole life in the table.
func BenchmarkTableGrantExpire(b *testing.B) {
	const n = 50_000
	rng := rand.New(rand.NewPCG(1, 2))
	sessions := make([]Session, n)
	for i := range sessions {
		sessions[i] = Session{
			ID:  ID(fmt.Sprintf("%032x", i)),
			TTL: time.Duration(1+rng.IntN(600)) * time.Second,
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		tbl := NewTable()
		for _, s := range sessions {
			tbl.Grant(s, t0)
		}
		ended := 0
		for now := t0; ended < n; now = now.Add(time.Second) {
			ended += len(tbl.Expire(now))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/session")
}

// TestTablePage pages through live sessions with every page size, with
// and without a holder filter, and checks the pages add up to List.
func TestTablePage(t *testing.T) {
	tbl := NewTable()
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 50 {
		ttl := 10 + r.IntN(20)
		tbl.Grant(Session{ID: ID(fmt.Sprintf("%016x", r.Uint64())), Holder: fmt.Sprint("h", i%3), TTL: sec(ttl)}, t0)
	}
	now := at(15) // some have expired, not yet removed
	for _, holder := range []string{"", "h1"} {
		var want []Info
		for _, in := range tbl.List(now) {
			if holder == "" || in.Holder == holder {
				want = append(want, in)
			}
		}
		for limit := 1; limit <= len(want)+1; limit++ {
			var got []Info
			var after ID
			for pages := 0; ; pages++ {
				page, next := tbl.Page(after, limit, holder, now)
				if len(page) > limit || pages > len(want)+1 {
					t.Fatalf("holder %q limit %d: page of %d after %d pages", holder, limit, len(page), pages)
				}
				got = append(got, page...)
				if next == "" {
					break
				}
				if len(page) == 0 || next != page[len(page)-1].ID {
					t.Fatalf("holder %q limit %d: next %q after %v", holder, limit, next, page)
				}
				after = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("holder %q limit %d: pages gave %d sessions, want %d", holder, limit, len(got), len(want))
			}
		}
	}
	// A page that ends exactly at the last session says so.
	all := tbl.List(now)
	if page, next := tbl.Page("", len(all), "", now); len(page) != len(all) || next != "" {
		t.Fatalf("exact page: %d sessions, next %q", len(page), next)
	}
}

func TestShort(t *testing.T) {
	for id, want := range map[ID]string{
		"0123456789abcdef0123456789abcdef": "01234567…",
		"01234567":                         "01234567",
		"":                                 "",
		"01234567…":                        "01234567…",
	} {
		if got := id.Short(); got != want {
			t.Errorf("%q.Short() = %q, want %q", id, got, want)
		}
	}
}
