package blockmap

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPickFor: a repair target never holds a replica of the block (even a
// corrupt one), is not excluded, not draining and above the floor, and is
// on a host no replica is on while there is one.
func TestPickFor(t *testing.T) {
	m := New(t0)
	ids := map[string]ServerID{}
	for _, s := range []struct {
		addr string
		u    Usage
	}{
		{"a:1", disk("x", 10*gib)}, {"b:1", disk("x", 90*gib)}, {"c:1", disk("y", 50*gib)},
		{"d:1", disk("z", 40*gib)}, {"e:1", disk("w", gib/2)}, {"f:1", disk("v", 80*gib)},
	} {
		ids[s.addr] = m.Register(s.addr, s.u, t0)
	}
	require.True(t, m.SetDraining("f:1", true))
	const b BlockID = 7
	m.Received(ids["a:1"], "a:1", map[BlockID]Replica{b: {Size: 1, Sealed: true}})
	m.Received(ids["c:1"], "c:1", map[BlockID]Replica{b: {Size: 1, Sealed: true}})
	m.MarkCorrupt(b, "c:1")
	p := Policy{MinFree: gib}

	// b:1 has the most room but shares host x with a:1; y holds c:1.
	got, err := m.PickFor(b, p, nil)
	require.NoError(t, err)
	require.Equal(t, "d:1", got)
	got, err = m.PickFor(b, p, []string{"d:1"})
	require.NoError(t, err)
	require.Equal(t, "b:1", got, "a shared host when no other is left")
	_, err = m.PickFor(b, p, []string{"d:1", "b:1"})
	require.ErrorIs(t, err, ErrNotEnoughServers, "e is below the floor, f draining, a and c hold the block")
}
