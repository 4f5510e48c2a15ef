package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/e2e/tablet"
)

// TestChunkserverKill9 kills a chunkserver holding replicas with SIGKILL
// and restarts it on the same data and address. A closed file written
// before the kill reads back intact through the SDK and from the restarted
// replica itself (its Read RPC); a file open at the kill keeps every byte
// synced before it on the restarted replica, and the writer finishes it
// on the two others (the nameserver then retires the restarted replica,
// which missed the rest); and with the two others gone, the restarted
// chunkserver alone serves the closed file.
func TestChunkserverKill9(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	ctx := ctxT(t, 60*time.Second)
	require.NoError(t, cl.MkdirAll(ctx, "/data", 0))

	const closedPath, openPath = "/data/closed", "/data/open"
	closedData := tablet.Pattern(closedPath, 0, 3<<20+12345)
	writeFile(t, cl, closedPath, closedData)
	_, blk := locate(t, cl, closedPath)
	require.Len(t, blk.Replicas, 3)

	openData := tablet.Pattern(openPath, 0, 2<<20+777)
	const syncedLen = 1<<20 + 333
	w, err := cl.Create(ctx, openPath)
	require.NoError(t, err)
	_, err = w.Write(openData[:syncedLen])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	_, openBlk := locate(t, cl, openPath)

	victim := c.index(blk.Replicas[0])
	require.Contains(t, openBlk.Replicas, c.csAddrs[victim])
	c.killChunkserver(victim)
	c.restartChunkserver(victim)
	addr := c.csAddrs[victim]

	r := readReplica(t, c.nsAddr, closedPath, addr, blk.ID)
	require.True(t, r.sealed, "the restarted replica of %s lost its seal", closedPath)
	requireBytes(t, closedData, r.data, "the restarted replica of %s", closedPath)
	t.Logf("restarted %s serves %s: %d bytes, sealed, intact", addr, closedPath, r.size)

	r = readReplica(t, c.nsAddr, openPath, addr, openBlk.ID)
	require.GreaterOrEqual(t, r.size, int64(syncedLen), "the restarted replica of %s lost synced bytes", openPath)
	requireBytes(t, openData[:syncedLen], r.data[:syncedLen], "synced bytes of %s on the restarted replica", openPath)
	t.Logf("restarted %s kept %d bytes of %s (%d synced before the kill)", addr, r.size, openPath, syncedLen)

	// The writer lost that replica with the kill and goes on with the two
	// others.
	_, err = w.Write(openData[syncedLen:])
	require.NoError(t, err)
	require.NoError(t, w.CloseContext(ctx))
	requireBytes(t, openData, readFile(t, cl, openPath), "%s read back", openPath)

	requireBytes(t, closedData, readFile(t, cl, closedPath), "%s read back", closedPath)

	// Only the restarted chunkserver is left: the SDK reads from it.
	for i := range c.cs {
		if i != victim {
			c.killChunkserver(i)
		}
	}
	reader := c.client()
	var got []byte
	waitFor(t, 20*time.Second, closedPath+" to be readable from the restarted chunkserver alone", func() bool {
		got, err = tryReadFile(reader, closedPath)
		return err == nil
	})
	requireBytes(t, closedData, got, "%s read from the restarted chunkserver alone", closedPath)
}
