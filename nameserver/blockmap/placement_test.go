package blockmap

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

const gib = 1 << 30

func disk(host string, free int64) Usage {
	return Usage{Host: host, Capacity: 100 * gib, Used: 100*gib - free, Free: free}
}

func TestPickFreeSpaceFloor(t *testing.T) {
	m := New(t0)
	m.Register("a:1", disk("", 10*gib), t0)
	m.Register("b:1", disk("", gib/2), t0) // below the floor
	m.Register("c:1", Usage{}, t0)         // cannot tell: eligible
	for range 10 {
		picked, err := m.Pick(3, Policy{MinFree: gib})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"a:1", "c:1"}, picked)
	}
	// A heartbeat that reports room makes b eligible again.
	id := m.Servers()[1].ID
	require.True(t, m.Heartbeat(id, "b:1", disk("", 2*gib), t0))
	picked, err := m.Pick(3, Policy{MinFree: gib})
	require.NoError(t, err)
	require.Len(t, picked, 3)
	// The floor applies to the minimum too.
	_, err = m.Pick(3, Policy{MinFree: 50 * gib, MinReplicas: 2})
	require.ErrorIs(t, err, ErrNotEnoughServers)
}

func TestPickDistinctHosts(t *testing.T) {
	m := New(t0)
	// Two chunkservers on host x, with the most room; one each on y and z.
	m.Register("10.0.0.1:1", disk("", 90*gib), t0)
	m.Register("10.0.0.1:2", disk("", 80*gib), t0)
	m.Register("10.0.0.2:1", disk("", 10*gib), t0)
	m.Register("127.0.0.1:5", disk("z", 5*gib), t0) // a --host-id wins over the address
	m.Register("127.0.0.1:6", disk("", 5*gib), t0)
	for range 20 {
		picked, err := m.Pick(3, Policy{})
		require.NoError(t, err)
		hosts := map[string]bool{}
		for _, p := range picked {
			h := hostOfAddr(m, p)
			require.False(t, hosts[h], "two replicas on host %s: %v", h, picked)
			hosts[h] = true
		}
	}
	// More replicas than hosts: fill up from the rest.
	m2 := New(t0)
	m2.Register("h:1", disk("", gib), t0)
	m2.Register("h:2", disk("", gib), t0)
	picked, err := m2.Pick(2, Policy{})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"h:1", "h:2"}, picked)
}

// seeded gives m a fixed source of placement choices, so that a test's
// draws are the same every run.
func seeded(m *Map) *Map {
	m.mu.rand = rand.New(rand.NewPCG(1, 2))
	return m
}

func hostOfAddr(m *Map, addr string) string {
	for _, s := range m.Servers() {
		if s.Addr == addr {
			return s.hostOf()
		}
	}
	return ""
}

// TestPickSpreadsByFreeSpace: new blocks go to chunkservers at random in
// proportion to their free space above the reserve.
func TestPickSpreadsByFreeSpace(t *testing.T) {
	m := seeded(New(t0))
	m.Register("a:1", disk("a", 31*gib), t0)
	m.Register("b:1", disk("b", 11*gib), t0)
	count := map[string]int{}
	for range 4000 {
		picked, err := m.Pick(1, Policy{MinFree: gib})
		require.NoError(t, err)
		count[picked[0]]++
	}
	// 30 GiB of room against 10: a takes three for each of b's.
	require.InDelta(t, 3000, count["a:1"], 140, "%v", count) // five standard deviations
}

// TestPickNewDiskTakesItsShare: a chunkserver with a new, empty disk gets
// more new blocks than the others, not every one: with ten times their
// room it weighs as four times the median (maxWeightRatio), so the
// others still get their share while full reports keep coming. (The
// placement before took the most free space per block in flight since
// the last report: the new disk took all 300.)
func TestPickNewDiskTakesItsShare(t *testing.T) {
	m := seeded(New(t0))
	ids := map[string]ServerID{}
	for _, s := range []struct {
		addr string
		free int64
	}{{"a:1", 10 * gib}, {"b:1", 10 * gib}, {"c:1", 10 * gib}, {"new:1", 100 * gib}} {
		ids[s.addr] = m.Register(s.addr, disk(s.addr, s.free), t0)
	}
	count := map[string]int{}
	for i := range 300 {
		if i%5 == 0 { // a full report from everyone every 5 new blocks
			for addr, id := range ids {
				m.Report(id, addr, nil, t0)
			}
		}
		picked, err := m.Pick(1, Policy{})
		require.NoError(t, err)
		count[picked[0]]++
	}
	t.Logf("300 new blocks: %v", count)
	for _, addr := range []string{"a:1", "b:1", "c:1"} {
		require.InDelta(t, 300*10/70, count[addr], 20, "%s: its share, the new disk weighing four of theirs", addr)
	}
}

// TestPickLiarTakesNoMoreThanItsShare: a chunkserver that claims 2^62
// free bytes on a volume of 2^62 is believed no further than
// MaxVolumeBytes, and weighs at most maxWeightRatio times the median of
// the others: it takes some new blocks, not nearly all of them.
func TestPickLiarTakesNoMoreThanItsShare(t *testing.T) {
	m := seeded(New(t0))
	for _, a := range []string{"a:1", "b:1", "c:1"} {
		m.Register(a, disk(a, 10*gib), t0)
	}
	liar := Usage{Host: "liar", Capacity: 1 << 62, Free: 1 << 62, Used: -1,
		Volumes: []Volume{{Capacity: 1 << 62, Free: 1 << 62}, {Capacity: 100 * gib, Free: 1 << 62}}}
	m.Register("liar:1", liar, t0)
	s, ok := m.Registered("liar:1")
	require.True(t, ok)
	require.Equal(t, MaxVolumeBytes+100*gib, s.Capacity)
	require.Equal(t, MaxVolumeBytes+100*gib, s.Free)
	require.Zero(t, s.Used)
	require.Equal(t, int64(100*gib), s.Volumes[1].Free, "free space beyond the capacity")
	count := map[string]int{}
	for range 2000 {
		picked, err := m.Pick(1, Policy{MinFree: gib})
		require.NoError(t, err)
		count[picked[0]]++
	}
	t.Logf("2000 new blocks: %v", count)
	// 4 of 7 at most (four times the median against three ones).
	require.InDelta(t, 2000*4/7, count["liar:1"], 120, "%v", count)
	require.Equal(t, int64(1<<63-1), SatAdd(1<<62, 1<<62))
}

// TestPickVolumes: a chunkserver's room is that of its healthy volumes
// with free space above the reserve (the larger of the floor and what the
// fill ratio leaves); full and failed volumes take nothing, and a
// chunkserver with no volume that can take a replica is not picked.
func TestPickVolumes(t *testing.T) {
	vol := func(i int, state VolumeState, capacity, free int64) Volume {
		return Volume{Index: i, State: state, Capacity: capacity, Free: free}
	}
	m := seeded(New(t0))
	// a: one healthy volume with 50 GiB of room above a 0.9 fill.
	m.Register("a:1", Usage{Host: "a", Volumes: []Volume{vol(0, VolumeHealthy, 100*gib, 60*gib), vol(1, VolumeFailed, 0, 0)}}, t0)
	// b: a healthy volume past the fill ratio, a full one, a failed one.
	m.Register("b:1", Usage{Host: "b", Volumes: []Volume{vol(0, VolumeHealthy, 100*gib, 9*gib), vol(1, VolumeFull, 100*gib, 50*gib),
		vol(2, VolumeFailed, 100*gib, 90*gib)}}, t0)
	// c: two healthy volumes, 10 GiB of room each.
	m.Register("c:1", Usage{Host: "c", Volumes: []Volume{vol(0, VolumeHealthy, 100*gib, 20*gib), vol(1, VolumeHealthy, 100*gib, 20*gib)}}, t0)
	p := Policy{MinFree: gib, MaxFill: 0.9}
	count := map[string]int{}
	for range 3500 {
		picked, err := m.Pick(1, p)
		require.NoError(t, err)
		count[picked[0]]++
	}
	require.Zero(t, count["b:1"], "b has no volume with room")
	require.InDelta(t, 2500, count["a:1"], 135, "%v: 50 GiB of room against 20", count)
	_, err := m.Pick(3, Policy{MinFree: gib, MaxFill: 0.9, MinReplicas: 3})
	require.ErrorIs(t, err, ErrNotEnoughServers)
}

func TestPickDegraded(t *testing.T) {
	m := New(t0)
	m.Register("a:1", disk("", gib), t0)
	m.Register("b:1", disk("", gib), t0)
	tests := []struct {
		want, min int
		got       int
		err       bool
	}{
		{want: 3, min: 0, got: 2},
		{want: 3, min: 1, got: 2},
		{want: 3, min: 2, got: 2},
		{want: 3, min: 3, err: true},
		{want: 1, min: 3, got: 1}, // the minimum never exceeds the replication
		{want: 2, min: 2, got: 2},
	}
	for _, tc := range tests {
		picked, err := m.Pick(tc.want, Policy{MinReplicas: tc.min})
		if tc.err {
			require.ErrorIs(t, err, ErrNotEnoughServers, "%+v", tc)
			continue
		}
		require.NoError(t, err, "%+v", tc)
		require.Len(t, picked, tc.got, "%+v", tc)
	}
}
