package blockmap

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reps builds a report naming ids, each sealed at size id.
func reps(ids ...BlockID) map[BlockID]Replica {
	out := make(map[BlockID]Replica, len(ids))
	for _, id := range ids {
		out[id] = Replica{Size: int64(id), Version: 1, Sealed: true}
	}
	return out
}

// blocksOf returns the Blocks count of the registration at addr.
func blocksOf(t *testing.T, m *Map, addr string) int {
	t.Helper()
	for _, s := range m.Servers() {
		if s.Addr == addr {
			return s.Blocks
		}
	}
	t.Fatalf("no server at %s", addr)
	return 0
}

func TestReportPagesReplaceAtTheLastPage(t *testing.T) {
	m := New(t0)
	a := m.Register("a:1", Usage{}, t0)
	first, err := m.ReportPage(a, "a:1", Page{Report: 1, More: true}, reps(1, 2), t0)
	require.NoError(t, err)
	require.True(t, first, "every page of the first report is first")
	require.False(t, m.Servers()[0].Reported, "until its last page")
	first, err = m.ReportPage(a, "a:1", Page{Report: 1, Seq: 1}, reps(3), t0)
	require.NoError(t, err)
	require.True(t, first)
	require.Equal(t, []BlockID{1, 2, 3}, m.Held("a:1"))

	// The next report names 1 and 4: until its last page 2 and 3 stay.
	_, err = m.ReportPage(a, "a:1", Page{Report: 2, More: true}, reps(1), t0)
	require.NoError(t, err)
	require.Equal(t, []BlockID{1, 2, 3}, m.Held("a:1"))
	require.Equal(t, 3, blocksOf(t, m, "a:1"))
	require.True(t, m.Servers()[0].Reported)
	first, err = m.ReportPage(a, "a:1", Page{Report: 2, Seq: 1}, reps(4), t0)
	require.NoError(t, err)
	require.False(t, first)
	require.Equal(t, []BlockID{1, 4}, m.Held("a:1"))
	require.Equal(t, 2, blocksOf(t, m, "a:1"))
	require.Empty(t, m.Replicas(2))
	require.Len(t, m.mu.blocks, 2, "the sweep frees the replicas no longer held")
}

func TestReportPageBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages [][]BlockID
	}{
		{"one page", [][]BlockID{{1, 2, 3}}},
		{"pages of one", [][]BlockID{{1}, {2}, {3}}},
		{"empty last page", [][]BlockID{{1, 2}, {3}, {}}},
		{"empty report", [][]BlockID{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(t0)
			a := m.Register("a:1", Usage{}, t0)
			require.True(t, m.Received(a, "a:1", reps(9)))
			var want []BlockID
			for i, p := range tc.pages {
				more := i < len(tc.pages)-1
				first, err := m.ReportPage(a, "a:1", Page{Report: 5, Seq: uint32(i), More: more}, reps(p...), t0)
				require.NoError(t, err)
				require.True(t, first)
				want = append(want, p...)
			}
			require.Equal(t, append([]BlockID{}, want...), m.Held("a:1"), "block 9, received before the report and not in it, is gone")
			require.Equal(t, len(want), blocksOf(t, m, "a:1"))
		})
	}
}

// A replica received while a report is under way stays, whether the
// report names it or not: the report's listing may predate it.
func TestReceivedDuringReportIsKept(t *testing.T) {
	m := New(t0)
	a := m.Register("a:1", Usage{}, t0)
	_, ok := m.Report(a, "a:1", reps(1, 2, 3), t0)
	require.True(t, ok)
	_, err := m.ReportPage(a, "a:1", Page{Report: 7, More: true}, reps(1), t0)
	require.NoError(t, err)
	require.True(t, m.Received(a, "a:1", reps(5, 2)))
	m.DropReplica(3, "a:1")
	require.Equal(t, 3, blocksOf(t, m, "a:1"))
	_, err = m.ReportPage(a, "a:1", Page{Report: 7, Seq: 1}, reps(), t0)
	require.NoError(t, err)
	require.Equal(t, []BlockID{1, 2, 5}, m.Held("a:1"))
	require.Equal(t, 3, blocksOf(t, m, "a:1"))
}

func TestReportPageOrder(t *testing.T) {
	m := New(t0)
	a := m.Register("a:1", Usage{}, t0)
	_, err := m.ReportPage(a, "a:1", Page{Report: 1, Seq: 1}, reps(1), t0)
	require.ErrorIs(t, err, ErrReportOrder, "no page 0")
	_, err = m.ReportPage(a, "a:1", Page{Report: 1, More: true}, reps(1), t0)
	require.NoError(t, err)
	_, err = m.ReportPage(a, "a:1", Page{Report: 1, Seq: 2}, reps(2), t0)
	require.ErrorIs(t, err, ErrReportOrder, "page 1 skipped")
	first, err := m.ReportPage(a, "a:1", Page{Report: 2, More: true}, reps(3), t0)
	require.NoError(t, err, "page 0 starts another report")
	require.True(t, first, "no report has completed yet")
	_, err = m.ReportPage(a, "a:1", Page{Report: 1, Seq: 1}, reps(2), t0)
	require.ErrorIs(t, err, ErrReportOrder, "the abandoned report")
	_, err = m.ReportPage(a, "a:1", Page{Report: 2, Seq: 1}, reps(4), t0)
	require.NoError(t, err)
	require.Equal(t, []BlockID{3, 4}, m.Held("a:1"))
	require.True(t, m.Servers()[0].Reported)

	_, err = m.ReportPage(a+1, "a:1", Page{}, reps(1), t0)
	require.ErrorIs(t, err, ErrUnknownServer)
	_, err = m.ReportPage(a, "a:1", Page{Report: 3, More: true}, reps(1), t0)
	require.NoError(t, err)
	b := m.Register("a:1", Usage{}, t0)
	_, err = m.ReportPage(a, "a:1", Page{Report: 3, Seq: 1}, reps(1), t0)
	require.ErrorIs(t, err, ErrUnknownServer, "a new registration ends the old one's report")
	require.Empty(t, m.Held("a:1"))
	first, err = m.ReportPage(b, "a:1", Page{}, reps(8), t0)
	require.NoError(t, err)
	require.True(t, first, "the new registration's first report")
	require.Equal(t, []BlockID{8}, m.Held("a:1"))
}

// A report bigger than a batch, with other servers' replicas around it,
// leaves every count right and frees what it drops.
func TestReportManyBatches(t *testing.T) {
	m := New(t0)
	a := m.Register("a:1", Usage{}, t0)
	b := m.Register("b:1", Usage{}, t0)
	n := 3*batch + 7
	all := make(map[BlockID]Replica, n)
	for i := 1; i <= n; i++ {
		all[BlockID(i)] = Replica{Size: int64(i)}
	}
	_, ok := m.Report(a, "a:1", all, t0)
	require.True(t, ok)
	_, ok = m.Report(b, "b:1", all, t0)
	require.True(t, ok)
	half := make(map[BlockID]Replica, n/2)
	for i := 1; i <= n; i += 2 {
		half[BlockID(i)] = Replica{Size: 2 * int64(i)}
	}
	_, ok = m.Report(a, "a:1", half, t0)
	require.True(t, ok)
	require.Len(t, m.Held("a:1"), len(half))
	require.Equal(t, len(half), blocksOf(t, m, "a:1"))
	require.Equal(t, n, blocksOf(t, m, "b:1"))
	require.Equal(t, []Replica{{Addr: "a:1", Size: 2}, {Addr: "b:1", Size: 1}}, m.Replicas(1))
	require.Equal(t, []Replica{{Addr: "b:1", Size: 2}}, m.Replicas(2))

	m.Expire(t0.Add(time.Minute), time.Second)
	require.Empty(t, m.mu.blocks, "the replicas of dead servers are freed")
}
