package nameserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestPagedReportsRebuildTheMap: chunkservers that report one replica
// per page rebuild the map of a restarted nameserver: safe mode counts
// the blocks page by page and ends, and every replica is located again.
func TestPagedReportsRebuildTheMap(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3),
		testcluster.WithChunkserverConfig(func(_ int, cfg *chunkserver.Config) { cfg.TestingKnobs.ReportPage = 1 }))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	const files = 4
	for i := range files {
		w, err := c.Create(ctx, fmt.Sprintf("/f%d", i))
		require.NoError(t, err)
		_, err = w.Write([]byte("data"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}

	cl.RestartNameServer()
	ns := nameServerClient(cl)
	require.Eventually(t, func() bool {
		sm, err := ns.GetSafeMode(ctx, &bfspb.GetSafeModeRequest{})
		return err == nil && !sm.On && sm.ReportedBlocks == files
	}, 30*time.Second, 20*time.Millisecond, "safe mode did not end on paged reports")
	require.Eventually(t, func() bool {
		for i := range files {
			loc, err := c.Locate(ctx, fmt.Sprintf("/f%d", i))
			if err != nil || len(loc.Blocks) != 1 || len(loc.Blocks[0].Replicas) != 3 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the replicas were not all reported again")
}
