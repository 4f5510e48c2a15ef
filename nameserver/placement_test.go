package nameserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver"
	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestPlacementHostsAndFloor runs five chunkservers on one machine as if
// on four hosts (--host-id): two share host h0, and the one on h2 has less
// free space than the floor. Every block gets three replicas on three
// distinct hosts, never on the full chunkserver.
func TestPlacementHostsAndFloor(t *testing.T) {
	const gib = 1 << 30
	hosts := []string{"h0", "h0", "h1", "h2", "h3"}
	cl := testcluster.Start(t, testcluster.WithChunkservers(len(hosts)),
		testcluster.WithChunkserverConfig(func(i int, cfg *chunkserver.Config) {
			cfg.HostID = hosts[i]
			// Just below the floor, h2 would still win the second block
			// on free space per block in flight (59 > 100/2).
			free := int64(100 * gib)
			if i == 3 {
				free = 59 * gib
			}
			cfg.TestingKnobs.DiskSpace = func(string) (int64, int64) { return 200 * gib, free }
		}),
		testcluster.WithNameServerConfig(func(cfg *nameserver.Config) { cfg.MinFreeBytes = 60 * gib }))
	hostOf := map[string]string{}
	for i, a := range cl.ChunkserverAddrs() {
		hostOf[a] = hosts[i]
	}
	full := cl.ChunkserverAddrs()[3]

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsClient())
	require.NoError(t, err)
	defer c.Close()
	ns := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr))
	for i := range 8 {
		p := fmt.Sprintf("/f%d", i)
		w, err := c.Create(ctx, p, sdk.Replication(3))
		require.NoError(t, err)
		_, err = w.Write([]byte("data"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		loc, err := ns.GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: p})
		require.NoError(t, err)
		ws := loc.Info.Blocks[0].WriteSet
		require.Len(t, ws, 3)
		seen := map[string]bool{}
		for _, a := range ws {
			require.NotEqual(t, full, a, "a chunkserver below the floor was picked")
			require.False(t, seen[hostOf[a]], "two replicas of %s on host %s: %v", p, hostOf[a], ws)
			seen[hostOf[a]] = true
		}
	}
}
