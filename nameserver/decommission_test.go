package nameserver_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// put writes a small file of replication r and returns its block's
// replicas.
func put(ctx context.Context, t *testing.T, c *sdk.Client, path string, r int) []string {
	t.Helper()
	w, err := c.Create(ctx, path, sdk.Replication(r))
	require.NoError(t, err)
	_, err = w.Write([]byte("data of " + path))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	loc, err := c.Locate(ctx, path)
	require.NoError(t, err)
	require.Len(t, loc.Blocks, 1)
	return loc.Blocks[0].Replicas
}

// byAddr returns the report's line for addr.
func byAddr(t *testing.T, servers []sdk.Chunkserver, addr string) sdk.Chunkserver {
	t.Helper()
	for _, s := range servers {
		if s.Address == addr {
			return s
		}
	}
	t.Fatalf("%s not in the report %+v", addr, servers)
	return sdk.Chunkserver{}
}

// TestDecommission: a draining chunkserver gets no new block, its replicas
// stop counting (fsck calls their blocks under-replicated), the report
// shows it draining until no block it holds needs it, and the decommission
// can be cancelled.
func TestDecommission(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	maddr := lis.Addr().String()
	lis.Close()
	cl := testcluster.Start(t, testcluster.WithChunkservers(4), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.MetricsAddr = maddr
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()

	// Three chunkservers hold /a: with the fourth draining, no copy of
	// its block can be made, with or without a repair running.
	holders := put(ctx, t, c, "/a", 3)
	require.Len(t, holders, 3)
	var idle string
	for _, a := range cl.ChunkserverAddrs() {
		if !slices.Contains(holders, a) {
			idle = a
		}
	}
	// A chunkserver with no block is safe to remove at once.
	got, err := c.Decommission(ctx, idle)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, sdk.ChunkserverDecommissioned, got[0].State)
	require.True(t, got[0].Draining)

	// One holding a block of /a is not: its replica no longer counts.
	x := holders[0]
	got, err = c.Decommission(ctx, x, x)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, sdk.ChunkserverDraining, got[0].State)
	require.EqualValues(t, 1, got[0].BlocksToMove)

	servers, err := c.Chunkservers(ctx)
	require.NoError(t, err)
	require.Len(t, servers, 4)
	require.Equal(t, sdk.ChunkserverDraining, byAddr(t, servers, x).State)
	require.Equal(t, sdk.ChunkserverLive, byAddr(t, servers, holders[1]).State)
	require.Equal(t, "2", gauge(t, cl, maddr, `bfs_nameserver_chunkservers{state="draining"}`))
	require.Equal(t, "2", gauge(t, cl, maddr, `bfs_nameserver_chunkservers{state="live"}`))
	require.NotEqual(t, "", gauge(t, cl, maddr, `bfs_nameserver_chunkserver_free_bytes{address="`+x+`"}`))

	// New blocks avoid both draining chunkservers.
	for _, p := range []string{"/b1", "/b2", "/b3"} {
		reps := put(ctx, t, c, p, 2)
		require.NotContains(t, reps, x, p)
		require.NotContains(t, reps, idle, p)
	}

	var affected []sdk.FsckFile
	totals, err := c.Fsck(ctx, "/", func(f sdk.FsckFile) error { affected = append(affected, f); return nil })
	require.NoError(t, err)
	require.True(t, totals.Healthy())
	require.EqualValues(t, 4, totals.Files)
	require.EqualValues(t, 1, totals.UnderReplicatedBlocks)
	require.Len(t, affected, 1)
	require.Equal(t, "/a", affected[0].Path)
	require.Equal(t, []string{x}, affected[0].Blocks[0].Draining)
	require.Equal(t, holders[1:], affected[0].Blocks[0].Replicas)

	// Once no live file needs its replica, it is safe to remove.
	require.NoError(t, c.Remove(ctx, "/a"))
	servers, err = c.Chunkservers(ctx)
	require.NoError(t, err)
	require.Equal(t, sdk.ChunkserverDecommissioned, byAddr(t, servers, x).State)

	got, err = c.CancelDecommission(ctx, x, idle)
	require.NoError(t, err)
	require.Equal(t, sdk.ChunkserverLive, got[0].State)
	require.Equal(t, sdk.ChunkserverLive, got[1].State)
	require.False(t, got[0].Draining)

	_, err = c.Decommission(ctx, x, "127.0.0.1:1")
	require.ErrorIs(t, err, sdk.ErrNotFound)
	require.ErrorContains(t, err, `unknown chunkserver "127.0.0.1:1"`)
	servers, err = c.Chunkservers(ctx)
	require.NoError(t, err)
	require.Equal(t, sdk.ChunkserverLive, byAddr(t, servers, x).State, "a refused request changes nothing")
	_, err = c.Decommission(ctx)
	require.ErrorIs(t, err, sdk.ErrInvalidArgument)
	ns := adminClient(cl)
	resp, err := ns.Decommission(ctx, &bfspb.DecommissionRequest{Addresses: []string{""}})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, resp.Status, resp.Message)
}

// TestFsckAfterChunkserverLoss: once a chunkserver is declared dead the
// report shows it dead, fsck calls the blocks it held under-replicated, or
// missing where it held the only replica, and pages through the tree.
func TestFsckAfterChunkserverLoss(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	maddr := lis.Addr().String()
	lis.Close()
	cl := testcluster.Start(t, testcluster.WithChunkservers(3), testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.MetricsAddr = maddr
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()

	for _, d := range []string{"/d", "/e", "/empty"} {
		require.NoError(t, c.Mkdir(ctx, d, 0o755))
	}
	only := put(ctx, t, c, "/d/single", 1)[0]
	for _, p := range []string{"/d/r1", "/d/r2", "/e/r3"} {
		put(ctx, t, c, p, 3)
	}
	totals, err := c.Fsck(ctx, "/", func(f sdk.FsckFile) error { t.Errorf("healthy tree, yet %+v", f); return nil })
	require.NoError(t, err)
	require.Equal(t, sdk.FsckTotals{Files: 4, Dirs: 4, Bytes: totals.Bytes, Blocks: 4}, totals)

	i := slices.Index(cl.ChunkserverAddrs(), only)
	require.GreaterOrEqual(t, i, 0)
	cl.StopChunkserver(i)
	require.Eventually(t, func() bool {
		servers, err := c.Chunkservers(ctx)
		i := slices.IndexFunc(servers, func(s sdk.Chunkserver) bool { return s.Address == only })
		return err == nil && i >= 0 && servers[i].State == sdk.ChunkserverDead
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, "1", gauge(t, cl, maddr, `bfs_nameserver_chunkservers{state="dead"}`))
	require.Equal(t, "2", gauge(t, cl, maddr, `bfs_nameserver_chunkservers{state="live"}`))

	var affected []sdk.FsckFile
	totals, err = c.Fsck(ctx, "/d", func(f sdk.FsckFile) error { affected = append(affected, f); return nil })
	require.NoError(t, err)
	require.False(t, totals.Healthy())
	require.EqualValues(t, 3, totals.Files)
	require.EqualValues(t, 1, totals.MissingBlocks)
	require.EqualValues(t, 2, totals.UnderReplicatedBlocks)
	require.Len(t, affected, 3)
	require.Equal(t, []string{"/d/r1", "/d/r2", "/d/single"}, []string{affected[0].Path, affected[1].Path, affected[2].Path})
	require.True(t, affected[2].Blocks[0].Missing)
	require.True(t, affected[0].Blocks[0].UnderReplicated)
	require.Len(t, affected[0].Blocks[0].Replicas, 2)

	// Page by page, one affected file at a time, the walk covers the tree.
	ns := bfspb.NewNameServerClient(cl.Dial(cl.NameServerAddr))
	var paths []string
	var files int64
	for token, pages := "", 0; ; pages++ {
		require.Less(t, pages, 20)
		resp, err := ns.Fsck(ctx, &bfspb.FsckRequest{Path: "/", PageToken: token, PageSize: 1})
		require.NoError(t, err)
		require.Equal(t, bfspb.StatusCode_OK, resp.Status, resp.Message)
		require.LessOrEqual(t, len(resp.Files), 1)
		for _, f := range resp.Files {
			paths = append(paths, f.Path)
		}
		files += resp.Totals.Files
		if token = resp.NextPageToken; token == "" {
			break
		}
	}
	require.Equal(t, []string{"/d/r1", "/d/r2", "/d/single", "/e/r3"}, paths)
	require.EqualValues(t, 4, files)

	for _, tc := range []struct {
		req  *bfspb.FsckRequest
		want bfspb.StatusCode
	}{
		{&bfspb.FsckRequest{Path: "relative"}, bfspb.StatusCode_INVALID_ARGUMENT},
		{&bfspb.FsckRequest{Path: "/nope"}, bfspb.StatusCode_NOT_FOUND},
		{&bfspb.FsckRequest{Path: "/", PageToken: "garbage"}, bfspb.StatusCode_INVALID_ARGUMENT},
	} {
		resp, err := ns.Fsck(ctx, tc.req)
		require.NoError(t, err)
		require.Equal(t, tc.want, resp.Status, "%v: %s", tc.req, resp.Message)
	}
	// A token of one walk does not resume another.
	first, err := ns.Fsck(ctx, &bfspb.FsckRequest{Path: "/", PageSize: 1})
	require.NoError(t, err)
	resp, err := ns.Fsck(ctx, &bfspb.FsckRequest{Path: "/e", PageToken: first.NextPageToken})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_INVALID_ARGUMENT, resp.Status, resp.Message)

	// The dead chunkserver comes back: live again, nothing missing.
	cl.RestartChunkserver(i)
	require.Eventually(t, func() bool {
		totals, err := c.Fsck(ctx, "/", func(sdk.FsckFile) error { return nil })
		return err == nil && totals.Healthy() && totals.UnderReplicatedBlocks == 0
	}, 30*time.Second, 10*time.Millisecond)
	servers, err := c.Chunkservers(ctx)
	require.NoError(t, err)
	require.Equal(t, sdk.ChunkserverLive, byAddr(t, servers, only).State)
}

// TestDecommissionSurvivesRestart: a drain is recorded in the namespace,
// so a restarted nameserver still sends no new block to the chunkserver,
// until the decommission is cancelled.
func TestDecommissionSurvivesRestart(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(4))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr, cl.AsAdmin())
	require.NoError(t, err)
	defer c.Close()
	drained := cl.ChunkserverAddrs()[0]
	_, err = c.Decommission(ctx, drained)
	require.NoError(t, err)

	cl.RestartNameServer()
	require.Eventually(t, func() bool { return cl.NameServer().LiveChunkservers() == 4 }, 30*time.Second, 10*time.Millisecond)
	servers, err := c.Chunkservers(ctx)
	require.NoError(t, err)
	require.True(t, byAddr(t, servers, drained).Draining, "the drain after a restart")
	for i := range 8 {
		require.NotContains(t, put(ctx, t, c, fmt.Sprintf("/after-%d", i), 3), drained)
	}

	_, err = c.CancelDecommission(ctx, drained)
	require.NoError(t, err)
	cl.RestartNameServer()
	require.Eventually(t, func() bool { return cl.NameServer().LiveChunkservers() == 4 }, 30*time.Second, 10*time.Millisecond)
	servers, err = c.Chunkservers(ctx)
	require.NoError(t, err)
	require.False(t, byAddr(t, servers, drained).Draining, "a cancelled drain after a restart")
	require.Contains(t, put(ctx, t, c, "/back", 4), drained)
}
