package nameserver_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bfs-go/bfs/internal/testcluster"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// TestStaleReplicaRejoins: a chunkserver stopped in the middle of a write
// misses the close of the file. When it comes back its replica, shorter
// than the file and never sealed, is sealed and then deleted, and readers
// are never sent to it.
func TestStaleReplicaRejoins(t *testing.T) {
	cl := testcluster.Start(t, testcluster.WithChunkservers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, cl.NameServerAddr)
	require.NoError(t, err)
	defer c.Close()

	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	w, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	_, err = w.Write(data[:len(data)/2])
	require.NoError(t, err)
	require.NoError(t, w.Sync(ctx))
	loc, err := c.Locate(ctx, "/f")
	require.NoError(t, err)
	block, stale := loc.Blocks[0].ID, loc.Blocks[0].Replicas[0]
	victim := slices.Index(cl.ChunkserverAddrs(), stale)
	require.GreaterOrEqual(t, victim, 0)
	cl.StopChunkserver(victim)
	_, err = w.Write(data[len(data)/2:])
	require.NoError(t, err)
	require.NoError(t, w.Close())

	cl.RestartChunkserver(victim)
	conn, err := grpc.NewClient(stale, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	cs := bfspb.NewChunkServerClient(conn)
	require.Eventually(t, func() bool {
		info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: block})
		return err == nil && info.Status == bfspb.StatusCode_NOT_FOUND
	}, 30*time.Second, 20*time.Millisecond, "the stale replica on %s was not deleted", stale)

	loc, err = c.Locate(ctx, "/f")
	require.NoError(t, err)
	require.NotContains(t, loc.Blocks[0].Replicas, stale)
	r, err := c.Open(ctx, "/f")
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)
}
