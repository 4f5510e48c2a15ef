package blockmap

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDrainingAndRegistered(t *testing.T) {
	now := time.Unix(100, 0)
	m := New(now)
	m.Register("10.0.0.1:1", Usage{Host: "rack1-a", Capacity: 10, Free: 5}, now)
	m.Register("10.0.0.2:1", Usage{}, now)

	s, ok := m.Registered("10.0.0.1:1")
	require.True(t, ok)
	require.Equal(t, "rack1-a", s.HostName())
	require.EqualValues(t, 5, s.Free)
	s, ok = m.Registered("10.0.0.2:1")
	require.True(t, ok)
	require.Equal(t, "10.0.0.2", s.HostName())
	_, ok = m.Registered("10.0.0.3:1")
	require.False(t, ok)

	require.False(t, m.Draining("10.0.0.1:1"))
	require.True(t, m.SetDraining("10.0.0.1:1", true))
	require.True(t, m.Draining("10.0.0.1:1"))
	s, _ = m.Registered("10.0.0.1:1")
	require.True(t, s.Draining)

	// The mark is kept by address, also once the chunkserver is dead.
	m.Expire(now.Add(time.Minute), time.Second)
	_, ok = m.Registered("10.0.0.1:1")
	require.False(t, ok)
	require.True(t, m.Draining("10.0.0.1:1"))
	require.True(t, m.SetDraining("10.0.0.1:1", false))
	require.False(t, m.Draining("10.0.0.1:1"))
}
