package nameserver

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/nameserver/blockmap"
)

// TestDeadListBounded: past maxDeadRecords the chunkserver silent the
// longest is forgotten, and one that registers again leaves the list.
func TestDeadListBounded(t *testing.T) {
	d := newDeadList()
	snapshot := func() map[string]blockmap.Server {
		var out map[string]blockmap.Server
		d.view(func(m map[string]blockmap.Server) { out = maps.Clone(m) })
		return out
	}
	start := time.Unix(1000, 0)
	for i := range maxDeadRecords + 2 {
		d.add(blockmap.Server{Addr: fmt.Sprintf("cs%d:1", i), LastBeat: start.Add(time.Duration(i) * time.Second)})
	}
	dead := snapshot()
	require.Len(t, dead, maxDeadRecords)
	require.NotContains(t, dead, "cs0:1", "the oldest is forgotten first")
	require.NotContains(t, dead, "cs1:1")
	require.Equal(t, start.Add(2*time.Second), dead["cs2:1"].LastBeat)

	d.remove("cs2:1")
	dead = snapshot()
	require.NotContains(t, dead, "cs2:1")
	require.Len(t, dead, maxDeadRecords-1)

	// Expire and record happen at once for a reader.
	got := d.expire(func() []blockmap.Server { return []blockmap.Server{{Addr: "late:1", LastBeat: start.Add(time.Hour)}} })
	require.Len(t, got, 1)
	require.Contains(t, snapshot(), "late:1")
}
