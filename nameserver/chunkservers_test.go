package nameserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/nameserver/blockmap"
)

// TestDeadListBounded: past maxDeadRecords the chunkserver silent the
// longest is forgotten, and one that registers again leaves the list.
func TestDeadListBounded(t *testing.T) {
	d := newDeadList()
	start := time.Unix(1000, 0)
	for i := range maxDeadRecords + 2 {
		d.add(blockmap.Server{Addr: fmt.Sprintf("cs%d:1", i), LastBeat: start.Add(time.Duration(i) * time.Second)})
	}
	require.Len(t, d.list(), maxDeadRecords)
	_, ok := d.get("cs0:1")
	require.False(t, ok, "the oldest is forgotten first")
	_, ok = d.get("cs1:1")
	require.False(t, ok)
	s, ok := d.get("cs2:1")
	require.True(t, ok)
	require.Equal(t, start.Add(2*time.Second), s.LastBeat)

	d.remove("cs2:1")
	_, ok = d.get("cs2:1")
	require.False(t, ok)
	require.Len(t, d.list(), maxDeadRecords-1)
}
