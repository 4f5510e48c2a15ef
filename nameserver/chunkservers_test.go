package nameserver

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// recorder collects the ChunkserverCmds a deadList writes.
type recorder struct {
	mu   sync.Mutex
	cmds []*bfspb.ChunkserverCmd
}

func (r *recorder) record(c *bfspb.ChunkserverCmd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, c)
}

func (r *recorder) take() []*bfspb.ChunkserverCmd {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.cmds
	r.cmds = nil
	return out
}

// TestDeadListBounded: past maxDeadRecords the chunkserver silent the
// longest is forgotten (and its record with it), and one that registers
// again leaves the list.
func TestDeadListBounded(t *testing.T) {
	var rec recorder
	d := newDeadList(rec.record)
	snapshot := func() map[string]blockmap.Server {
		var out map[string]blockmap.Server
		d.view(func(m map[string]blockmap.Server) { out = maps.Clone(m) })
		return out
	}
	start := time.Unix(1000, 0)
	var dead []blockmap.Server
	for i := range maxDeadRecords + 2 {
		dead = append(dead, blockmap.Server{Addr: fmt.Sprintf("cs%d:1", i), LastBeat: start.Add(time.Duration(i) * time.Second)})
	}
	d.expire(func() []blockmap.Server { return dead })
	got := snapshot()
	require.Len(t, got, maxDeadRecords)
	require.NotContains(t, got, "cs0:1", "the oldest is forgotten first")
	require.NotContains(t, got, "cs1:1")
	require.Equal(t, start.Add(2*time.Second), got["cs2:1"].LastBeat)
	cmds := rec.take()
	require.Len(t, cmds, maxDeadRecords+2)
	require.True(t, cmds[len(cmds)-1].Forget && cmds[len(cmds)-2].Forget)
	require.True(t, cmds[0].Record.Dead)

	d.registered("cs2:1", "h", start)
	got = snapshot()
	require.NotContains(t, got, "cs2:1")
	require.Len(t, got, maxDeadRecords-1)
	cmds = rec.take()
	require.Len(t, cmds, 1)
	require.Equal(t, "cs2:1", cmds[0].Address)
	require.False(t, cmds[0].Record.Dead)
	d.registered("cs2:1", "h", start)
	require.Empty(t, rec.take(), "a registration recorded already is not recorded again")

	// Expire and record happen at once for a reader.
	late := d.expire(func() []blockmap.Server { return []blockmap.Server{{Addr: "late:1", LastBeat: start.Add(time.Hour)}} })
	require.Len(t, late, 1)
	require.Contains(t, snapshot(), "late:1")
}

// TestDeadListAfterRestart: the records read back at start list the dead
// at once, and those registered before the restart once they have not
// come back within the timeout.
func TestDeadListAfterRestart(t *testing.T) {
	var rec recorder
	d := newDeadList(rec.record)
	start := time.Unix(1000, 0)
	d.load(map[string]*bfspb.ChunkserverRecord{
		"dead:1": {Host: "h1", Dead: true, LastHeartbeatNs: start.Add(-time.Hour).UnixNano(), Blocks: 7},
		"back:1": {Host: "h2"},
		"gone:1": {Host: "h3", LastHeartbeatNs: start.Add(-time.Minute).UnixNano()},
	})
	snapshot := func() map[string]blockmap.Server {
		var out map[string]blockmap.Server
		d.view(func(m map[string]blockmap.Server) { out = maps.Clone(m) })
		return out
	}
	require.Equal(t, []string{"dead:1"}, slices.Sorted(maps.Keys(snapshot())))
	require.Equal(t, 7, snapshot()["dead:1"].Blocks)
	d.registered("back:1", "h2", start)
	require.Empty(t, rec.take(), "back:1 was recorded registered")
	require.Empty(t, d.expireMissing(start.Add(time.Second), start, 10*time.Second), "within the timeout")
	gone := d.expireMissing(start.Add(11*time.Second), start, 10*time.Second)
	require.Len(t, gone, 1)
	require.Equal(t, "gone:1", gone[0].Addr)
	require.Equal(t, []string{"dead:1", "gone:1"}, slices.Sorted(maps.Keys(snapshot())))
	cmds := rec.take()
	require.Len(t, cmds, 1)
	require.True(t, cmds[0].Record.Dead)
	require.Equal(t, "h3", cmds[0].Record.Host)
}
