package blockmap

import (
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

func hostOfAddr(m *Map, addr string) string {
	for _, s := range m.Servers() {
		if s.Addr == addr {
			return s.hostOf()
		}
	}
	return ""
}

func TestPickSpreadsByFreeSpace(t *testing.T) {
	m := New(t0)
	m.Register("a:1", disk("a", 30*gib), t0)
	m.Register("b:1", disk("b", 10*gib), t0)
	count := map[string]int{}
	for range 40 {
		picked, err := m.Pick(1, Policy{})
		require.NoError(t, err)
		count[picked[0]]++
	}
	// Free space per block in flight: a takes three for each of b's.
	require.Equal(t, 30, count["a:1"])
	require.Equal(t, 10, count["b:1"])
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
