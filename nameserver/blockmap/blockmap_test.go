package blockmap

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1000, 0)

func TestRegisterHeartbeatExpire(t *testing.T) {
	m := New(t0)
	a := m.Register("a:1", Usage{}, t0)
	b := m.Register("b:1", Usage{}, t0)
	require.True(t, m.Heartbeat(a, "a:1", Usage{}, t0.Add(5*time.Second)))
	dead := m.Expire(t0.Add(12*time.Second), 10*time.Second)
	require.Len(t, dead, 1)
	require.Equal(t, b, dead[0].ID)
	require.False(t, m.Heartbeat(b, "b:1", Usage{}, t0.Add(13*time.Second)), "a dead server must register again")
	require.True(t, m.Dead("b:1", t0.Add(13*time.Second), 10*time.Second))
	require.False(t, m.Dead("a:1", t0.Add(13*time.Second), 10*time.Second))
	// An address never heard from is not dead while the nameserver is young.
	require.False(t, m.Dead("c:1", t0.Add(5*time.Second), 10*time.Second))
	require.True(t, m.Dead("c:1", t0.Add(11*time.Second), 10*time.Second))

	// Registering again replaces the old registration.
	a2 := m.Register("a:1", Usage{}, t0.Add(14*time.Second))
	require.NotEqual(t, a, a2)
	require.False(t, m.Heartbeat(a, "a:1", Usage{}, t0.Add(14*time.Second)))
	require.Len(t, m.Servers(), 1)
}

// TestIDOfAnotherRun: ids start over with every nameserver, so a
// chunkserver that slept through a restart may present an id the new
// nameserver gave to another chunkserver. The id alone must not do.
func TestIDOfAnotherRun(t *testing.T) {
	m := New(t0)
	id := m.Register("b:1", Usage{}, t0) // the new run's first registration
	require.False(t, m.Heartbeat(id, "a:1", Usage{}, t0), "a:1 holds b:1's id from an earlier run")
	_, ok := m.Report(id, "a:1", map[BlockID]Replica{1: {Size: 1}}, t0)
	require.False(t, ok)
	require.False(t, m.Received(id, "a:1", map[BlockID]Replica{1: {Size: 1, Sealed: true}}))
	require.Empty(t, m.Replicas(1))
	require.True(t, m.Heartbeat(id, "b:1", Usage{}, t0))
}

func TestReportsAndReplicas(t *testing.T) {
	m := New(t0)
	a := m.Register("a:1", Usage{}, t0)
	b := m.Register("b:1", Usage{}, t0)
	first, ok := m.Report(a, "a:1", map[BlockID]Replica{1: {Size: 10, Sealed: true}, 2: {Size: 5}}, t0)
	require.True(t, ok)
	require.True(t, first)
	ok = m.Received(b, "b:1", map[BlockID]Replica{1: {Size: 10, Sealed: true}})
	require.True(t, ok)
	require.Equal(t, []Replica{{Addr: "a:1", Size: 10, Sealed: true}, {Addr: "b:1", Size: 10, Sealed: true}}, m.Replicas(1))
	// A full report replaces what the server held.
	first, ok = m.Report(a, "a:1", map[BlockID]Replica{2: {Size: 6}}, t0)
	require.True(t, ok)
	require.False(t, first)
	require.Equal(t, []Replica{{Addr: "b:1", Size: 10, Sealed: true}}, m.Replicas(1))
	// A dead server's replicas are forgotten.
	m.Heartbeat(a, "a:1", Usage{}, t0.Add(9*time.Second))
	m.Expire(t0.Add(11*time.Second), 10*time.Second)
	require.Empty(t, m.Replicas(1))
	require.Equal(t, []Replica{{Addr: "a:1", Size: 6}}, m.Replicas(2))
	m.Forget(2)
	require.Empty(t, m.Replicas(2))
	_, ok = m.Report(b, "b:1", nil, t0)
	require.False(t, ok, "b is dead")
}

// TestPickSpreadsLoad: chunkservers that cannot tell their free space
// take new blocks alike, never two replicas of one.
func TestPickSpreadsLoad(t *testing.T) {
	m := seeded(New(t0))
	for _, addr := range []string{"a", "b", "c", "d"} {
		m.Register(addr, Usage{}, t0)
	}
	_, err := m.Pick(5, Policy{MinReplicas: 5})
	require.ErrorIs(t, err, ErrNotEnoughServers)
	count := map[string]int{}
	for range 400 {
		picked, err := m.Pick(3, Policy{})
		require.NoError(t, err)
		require.Len(t, picked, 3)
		seen := map[string]bool{}
		for _, p := range picked {
			require.False(t, seen[p], "replicas on distinct servers")
			seen[p] = true
			count[p]++
		}
	}
	for addr, n := range count {
		require.InDelta(t, 300, n, 45, addr) // five standard deviations
	}
}

func TestDropReplica(t *testing.T) {
	m := New(t0)
	a := m.Register("a:1", Usage{}, t0)
	b := m.Register("b:1", Usage{}, t0)
	m.Report(a, "a:1", map[BlockID]Replica{1: {Size: 4, Sealed: true}, 2: {Size: 2}}, t0)
	m.Report(b, "b:1", map[BlockID]Replica{1: {Size: 3, Sealed: true}}, t0)
	m.DropReplica(1, "b:1")
	m.DropReplica(1, "c:1") // unknown: nothing happens
	require.Equal(t, []Replica{{Addr: "a:1", Size: 4, Sealed: true}}, m.Replicas(1))
	m.Forget(1)
	// a's next report and expiry see only what it still holds.
	m.Report(a, "a:1", map[BlockID]Replica{2: {Size: 2}}, t0)
	require.Empty(t, m.Replicas(1))
	m.Expire(t0.Add(11*time.Second), 10*time.Second)
	require.Empty(t, m.Replicas(2))
}

func addrs(reps []Replica) []string {
	out := make([]string, len(reps))
	for i, r := range reps {
		out[i] = r.Addr
	}
	return out
}

func TestCorruptReplicaStopsCounting(t *testing.T) {
	m := New(t0)
	ids := map[string]ServerID{}
	for _, a := range []string{"a:1", "b:1", "c:1"} {
		ids[a] = m.Register(a, Usage{}, t0)
		_, ok := m.Report(ids[a], a, map[BlockID]Replica{7: {Size: 10, Sealed: true}}, t0)
		require.True(t, ok)
	}
	require.True(t, m.MarkCorrupt(7, "b:1"))
	require.False(t, m.MarkCorrupt(7, "b:1"), "marked already")
	require.Equal(t, []string{"a:1", "c:1"}, addrs(m.Replicas(7)))
	require.Equal(t, []string{"b:1"}, m.Corrupt(7))
	require.Equal(t, 1, m.CorruptCount())

	// A later report does not un-mark it.
	_, ok := m.Report(ids["b:1"], "b:1", map[BlockID]Replica{7: {Size: 10, Sealed: true}}, t0)
	require.True(t, ok)
	require.True(t, m.Received(ids["b:1"], "b:1", map[BlockID]Replica{7: {Size: 10, Sealed: true}}))
	require.Equal(t, []string{"a:1", "c:1"}, addrs(m.Replicas(7)))

	// Every replica corrupt: all are returned rather than none.
	m.MarkCorrupt(7, "a:1")
	m.MarkCorrupt(7, "c:1")
	require.Equal(t, []string{"a:1", "b:1", "c:1"}, addrs(m.Replicas(7)))

	// Deleting the replica, or forgetting the block, clears the marks.
	m.DropReplica(7, "a:1")
	require.Equal(t, []string{"b:1", "c:1"}, m.Corrupt(7))
	m.Forget(7)
	require.Empty(t, m.Corrupt(7))
	require.Zero(t, m.CorruptCount())
}

func TestDrainingStaysByAddressAndIsNeverPicked(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New(now)
	a := m.Register("a:1", Usage{}, now)
	m.Register("b:1", Usage{}, now)
	m.Report(a, "a:1", map[BlockID]Replica{7: {Size: 3, Sealed: true}}, now)
	if !m.SetDraining("a:1", true) || m.SetDraining("a:1", true) {
		t.Fatal("SetDraining: want a change once")
	}
	a = m.Register("a:1", Usage{}, now) // a restart keeps the mark
	m.Report(a, "a:1", map[BlockID]Replica{7: {Size: 3, Sealed: true}}, now)
	st := m.States(7)
	if len(st) != 1 || !st[0].Draining || st[0].Counts(st[0].Size) {
		t.Fatalf("States = %+v, want one draining replica that does not count", st)
	}
	if got := m.Held("a:1"); len(got) != 1 || got[0] != 7 {
		t.Fatalf("Held = %v", got)
	}
	for range 5 {
		got, err := m.Pick(1, Policy{})
		if err != nil || len(got) != 1 || got[0] != "b:1" {
			t.Fatalf("Pick = %v, %v; want b:1 only", got, err)
		}
	}
	if _, err := m.Pick(2, Policy{MinReplicas: 2}); err == nil {
		t.Fatal("Pick(2) with one eligible server: want an error")
	}
}
