package blockmap

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFailedVolumeLosesItsReplicas: the heartbeat that reports a volume
// failed takes that volume's replicas out of the map at once (and out of
// the chunkserver's count), leaves the other volumes' alone, and a
// replica of the failed volume reported later does not come back; a new
// registration starts over.
func TestFailedVolumeLosesItsReplicas(t *testing.T) {
	m := New(t0)
	vols := func(failed bool) Usage {
		st := VolumeHealthy
		if failed {
			st = VolumeFailed
		}
		return Usage{Volumes: []Volume{{Index: 0}, {Index: 1, State: st}}}
	}
	id := m.Register("a:1", vols(false), t0)
	other := m.Register("b:1", Usage{}, t0)
	_, ok := m.Report(id, "a:1", map[BlockID]Replica{
		1: {Size: 5, Sealed: true, Volume: 0},
		2: {Size: 5, Sealed: true, Volume: 1},
		3: {Size: 5, Sealed: true, Volume: 1},
	}, t0)
	require.True(t, ok)
	m.Received(other, "b:1", map[BlockID]Replica{2: {Size: 5, Sealed: true}})
	require.Equal(t, 3, serverByAddr(m, "a:1").Blocks)
	require.Equal(t, 1, m.States(2)[0].Volume, "the replica names its volume")

	require.True(t, m.Heartbeat(id, "a:1", vols(true), t0))
	require.Len(t, m.States(1), 1)
	require.Equal(t, []string{"b:1"}, addrsOf(m.States(2)))
	require.Empty(t, m.States(3))
	require.Equal(t, 1, serverByAddr(m, "a:1").Blocks)
	require.Equal(t, []BlockID{1}, m.Held("a:1"))

	// A BlockReceived that crossed the failure does not bring one back;
	// the volume stays failed even if a heartbeat said otherwise.
	m.Received(id, "a:1", map[BlockID]Replica{4: {Size: 5, Sealed: true, Volume: 1}})
	require.True(t, m.Heartbeat(id, "a:1", vols(false), t0))
	require.Empty(t, m.States(4))
	require.Equal(t, 1, serverByAddr(m, "a:1").Blocks)
	m.Received(id, "a:1", map[BlockID]Replica{5: {Size: 5, Sealed: true, Volume: 0}})
	require.Equal(t, 2, serverByAddr(m, "a:1").Blocks)

	// A volume index the map cannot tell apart is not recorded.
	m.Received(id, "a:1", map[BlockID]Replica{6: {Size: 5, Sealed: true, Volume: MaxVolumes}})
	require.Empty(t, m.States(6))

	// Registered again (restarted, the disk replaced): volume 1 is new.
	id = m.Register("a:1", vols(false), t0)
	m.Received(id, "a:1", map[BlockID]Replica{3: {Size: 5, Sealed: true, Volume: 1}})
	require.Len(t, m.States(3), 1)
}

// TestGoodReplica: the one definition of what counts.
func TestGoodReplica(t *testing.T) {
	for _, tc := range []struct {
		name         string
		r            ReplicaState
		good, counts bool
	}{
		{"sealed at the length", ReplicaState{Replica: Replica{Size: 10, Sealed: true}}, true, true},
		{"short", ReplicaState{Replica: Replica{Size: 9, Sealed: true}}, false, false},
		{"long (to be cut)", ReplicaState{Replica: Replica{Size: 11, Sealed: true}}, false, false},
		{"unsealed at the length", ReplicaState{Replica: Replica{Size: 10}}, false, false},
		{"corrupt", ReplicaState{Replica: Replica{Size: 10, Sealed: true}, Corrupt: true}, false, false},
		{"draining", ReplicaState{Replica: Replica{Size: 10, Sealed: true}, Draining: true}, true, false},
	} {
		require.Equal(t, tc.good, tc.r.Good(10), tc.name)
		require.Equal(t, tc.counts, tc.r.Counts(10), tc.name)
	}
}

func serverByAddr(m *Map, addr string) Server {
	s, _ := m.Registered(addr)
	return s
}

func addrsOf(states []ReplicaState) []string {
	var out []string
	for _, r := range states {
		out = append(out, r.Addr)
	}
	return out
}
